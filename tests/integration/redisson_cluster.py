"""Cluster mode of redisson_client.py (see its usage): the lock scripts routed to the master of
the lock name's slot (ClusterClient), and sharded pub/sub (SSUBSCRIBE on that master) for the
waits, spoken over a RESP2 socket of its own because python3-redis 4.3 has no sharded pub/sub.

python3-redis 4.3.4's RedisCluster is not used: it routes fine until a node dies, and then its
slot-map refresh fails with "cannot pickle '_thread.lock' object" (it deep-copies connection
arguments that hold a lock), so a client that outlives a kill -9 of a master could not unlock.
"""

import bisect
import socket
import time
import urllib.parse

import redis
from redis.crc import key_slot

CLUSTER_SCHEME = "redis+cluster://"
RETRY_PAUSE_S = 0.05


def connect_cluster(url):
    """A ClusterClient for `redis+cluster://[user:password@]host:port,host:port...`, or for a
    redis:// URL of one node."""
    scheme = CLUSTER_SCHEME if url.startswith(CLUSTER_SCHEME) else url.split("://", 1)[0] + "://"
    parts = urllib.parse.urlsplit("redis://" + url[len(scheme):])
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    seeds = []
    for address in hosts.split(","):
        host, _, port = address.rpartition(":")
        seeds.append((host, int(port or 6379)))
    return ClusterClient(seeds, urllib.parse.unquote(username) or None,
                         urllib.parse.unquote(password) or None)


class ClusterClient:
    """Sends each command to the master of its first key's slot, as Redisson's cluster
    connection manager does: the slot map comes from CLUSTER SLOTS, a MOVED updates it, an ASK
    is followed once (ASKING first), and TRYAGAIN, CLUSTERDOWN or a failed connection (a node
    died, a replica is being promoted) are tried again after a short pause with a fresh map,
    for up to `retry_s` seconds."""

    def __init__(self, seeds, username=None, password=None, retry_s=10.0):
        self.username, self.password = username, password
        self.known = list(dict.fromkeys(seeds))  # every node address seen, seeds first
        self.retry_s = retry_s
        self.starts, self.ranges = [], []  # sorted slot range starts; (start, end, master)
        self.moved = {}  # slot -> master, from MOVED replies since the last refresh
        self.conns = {}
        self.refresh()

    def node(self, address):
        """The connection (pool) to one node."""
        if address not in self.conns:
            self.conns[address] = redis.Redis(host=address[0], port=address[1],
                                              username=self.username, password=self.password,
                                              decode_responses=True, socket_timeout=10)
        return self.conns[address]

    def refresh(self):
        """Reads the slot map from the first node that answers CLUSTER SLOTS."""
        error = None
        for address in list(self.known):
            try:
                reply = self.node(address).execute_command("CLUSTER", "SLOTS")
            except redis.RedisError as e:
                error = e
                continue
            ranges = []
            for entry in reply:
                nodes = [(n[0] or address[0], int(n[1])) for n in entry[2:]]
                self.known.extend(n for n in nodes if n not in self.known)
                ranges.append((int(entry[0]), int(entry[1]), nodes[0]))
            self.ranges = sorted(ranges)
            self.starts = [r[0] for r in self.ranges]
            self.moved = {}
            return
        raise redis.ConnectionError("no cluster node answered CLUSTER SLOTS: " + str(error))

    def master_of(self, key):
        """(host, port) of the master serving `key`'s slot, as the map has it."""
        slot = key_slot(key.encode() if isinstance(key, str) else key)
        if slot in self.moved:
            return self.moved[slot]
        i = bisect.bisect_right(self.starts, slot) - 1
        if i < 0 or self.ranges[i][1] < slot:
            raise redis.ResponseError("CLUSTERDOWN slot %d is not served (client map)" % slot)
        return self.ranges[i][2]

    def execute(self, key, *args):
        """`args` on the master of `key`'s slot, following redirections (at most 16 in a row,
        as Redis's own cluster clients do)."""
        deadline = time.monotonic() + self.retry_s
        asking = None
        redirections = 0
        while True:
            try:
                if asking is None:
                    return self.node(self.master_of(key)).execute_command(*args)
                pipe = self.node(asking).pipeline(transaction=False)
                pipe.execute_command("ASKING")
                pipe.execute_command(*args)
                return pipe.execute()[1]
            except redis.ResponseError as e:
                words = str(e).split()
                asking = None
                if words and words[0] in ("MOVED", "ASK") and len(words) == 3 and redirections < 16:
                    redirections += 1
                    host, _, port = words[2].rpartition(":")
                    if words[0] == "ASK":
                        asking = (host, int(port))
                    else:  # until the next refresh, this slot goes there
                        self.moved[int(words[1])] = (host, int(port))
                    continue
                if not words or words[0] not in ("TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN"):
                    raise
                error = e
            except (redis.ConnectionError, redis.TimeoutError) as e:
                error = e
            if time.monotonic() >= deadline:
                raise error
            time.sleep(RETRY_PAUSE_S)
            redirections = 0
            try:
                self.refresh()
            except redis.RedisError:
                pass  # the next attempt fails the same way, or the deadline ends it

    def eval(self, script, numkeys, *keys_and_args):
        return self.execute(keys_and_args[0], "EVAL", script, numkeys, *keys_and_args)

    def ping(self):
        return self.node(self.ranges[0][2] if self.ranges else self.known[0]).ping()


class RespError(Exception):
    """An error reply (-MOVED ..., -ERR ...) read by ShardedPubSub."""


def resp_command(*args):
    """A command as RESP: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def resp_parse(buf, pos=0):
    """(value, next position) of the RESP2 reply at buf[pos:], or None if it is incomplete.

    Bulk and simple strings come out as str; an error reply as a RespError instance."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        return None
    kind, line = buf[pos:pos + 1], buf[pos + 1:end].decode()
    pos = end + 2
    if kind == b"+":
        return line, pos
    if kind == b"-":
        return RespError(line), pos
    if kind == b":":
        return int(line), pos
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, pos
        if len(buf) < pos + n + 2:
            return None
        return buf[pos:pos + n].decode(), pos + n + 2
    if kind == b"*":
        items = []
        for _ in range(max(int(line), 0)):
            parsed = resp_parse(buf, pos)
            if parsed is None:
                return None
            item, pos = parsed
            items.append(item)
        return items, pos
    raise RespError("unreadable reply from the server: " + repr(buf[pos - len(line) - 3:]))


class ShardedPubSub:
    """Redisson's waiting subscription on a Redis >= 7 cluster: SSUBSCRIBE on the master of the
    channel's slot, over a RESP2 socket of its own (python3-redis 4.3 has no sharded pub/sub).

    It offers what RLock.lock() uses of redis-py's PubSub (subscribe, get_message, unsubscribe,
    close), and reports "ssubscribe"/"smessage"/"sunsubscribe" as "subscribe"/"message"/
    "unsubscribe". Its channels must share one slot (RLock uses one channel). Like Redisson, it
    subscribes again on the slot's (new) master when the server ends a subscription it did not
    ask to end (the slot moved away) or the connection drops; the confirmation of that
    subscription is not a message, so a waiter still wakes only on an unlock message.
    """

    def __init__(self, cluster):
        self.cluster = cluster
        self.auth = [a for a in (cluster.username, cluster.password) if a]
        self.sock = None
        self.buf = b""
        self.channels = set()
        self.pending_unsubscribes = {}  # channel -> SUNSUBSCRIBEs sent, not yet confirmed

    def _master_of(self, channel):
        """The channel's slot master; through a failover (the map serving no master for the slot
        yet) asked again until the cluster's retry time, as Redisson resubscribes."""
        deadline = time.monotonic() + self.cluster.retry_s
        while True:
            try:
                return self.cluster.master_of(channel)
            except redis.ResponseError:
                if time.monotonic() >= deadline:
                    raise
            time.sleep(RETRY_PAUSE_S)
            try:
                self.cluster.refresh()
            except redis.RedisError:
                pass

    def _connect(self, channel, address=None):
        """A fresh connection to `address` (host, port), else to the channel's slot master."""
        self._drop()
        if address is None:
            address = self._master_of(channel)
        self.sock = socket.create_connection(address, timeout=10)
        if self.auth:
            self.sock.sendall(resp_command("AUTH", *self.auth))
            if isinstance(self._read_reply(time.monotonic() + 10), RespError):
                raise redis.AuthenticationError("AUTH refused by %s:%d" % address)

    def _drop(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.buf = b""
        self.pending_unsubscribes = {}

    def _read_reply(self, end):
        """The next reply, or None if none came before `end` (time.monotonic())."""
        while True:
            parsed = resp_parse(self.buf)
            if parsed is not None:
                reply, pos = parsed
                self.buf = self.buf[pos:]
                return reply
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not data:
                raise ConnectionError("the server closed the subscription connection")
            self.buf += data

    def _resubscribe(self, address=None):
        """Subscribes this object's channels again: at `address` (the node a MOVED named), else
        on the slot's master as the cluster reports it now."""
        if not self.channels:
            self._drop()
            return
        channel = next(iter(self.channels))
        self.cluster.refresh()  # the slot may have moved: ask again
        self._connect(channel, address)
        self.sock.sendall(resp_command("SSUBSCRIBE", *sorted(self.channels)))

    def subscribe(self, channel):
        self.channels.add(channel)
        if self.sock is None or self.sock.getpeername()[:2] != self._master_of(channel):
            self._resubscribe()
        else:
            self.sock.sendall(resp_command("SSUBSCRIBE", channel))

    def unsubscribe(self, channel):
        """SUNSUBSCRIBE, without waiting for the confirmation (as Redisson's unsubscribe)."""
        self.channels.discard(channel)
        if self.sock is None:
            return
        self.pending_unsubscribes[channel] = self.pending_unsubscribes.get(channel, 0) + 1
        try:
            self.sock.sendall(resp_command("SUNSUBSCRIBE", channel))
        except OSError:
            self._drop()

    def close(self):
        self.channels.clear()
        self._drop()

    def get_message(self, timeout):
        """The next subscription event as redis-py's PubSub gives it, or None: nothing within
        `timeout` s, or something that is not for the caller (the subscription was made
        again)."""
        end = time.monotonic() + timeout
        try:
            if self.sock is None:
                self._resubscribe()
            if self.sock is None:  # nothing subscribed
                time.sleep(max(end - time.monotonic(), 0))
                return None
            reply = self._read_reply(end)
        except (OSError, redis.RedisError):  # dropped: subscribe again, on the slot's master
            return self._recover(end)
        if isinstance(reply, RespError):
            words = str(reply).split()
            if words[0] == "MOVED" and len(words) == 3:
                host, port = words[2].rsplit(":", 1)
                return self._recover(end, (host, int(port)))
            if words[0] in ("CLUSTERDOWN", "TRYAGAIN", "LOADING"):  # failing over: again soon
                return self._recover(end, pause=True)
            raise redis.ResponseError("SSUBSCRIBE: " + str(reply))
        if not isinstance(reply, list) or len(reply) != 3:
            return None
        kind, channel, data = reply
        if kind == "smessage":
            return {"type": "message", "channel": channel, "data": data}
        if kind == "ssubscribe":
            return {"type": "subscribe", "channel": channel, "data": data}
        if kind == "sunsubscribe":
            if self.pending_unsubscribes.get(channel, 0) > 0:
                self.pending_unsubscribes[channel] -= 1
            elif channel in self.channels:  # ended by the server: the slot left this node
                return self._recover(end)
            return {"type": "unsubscribe", "channel": channel, "data": data}
        return None

    def _recover(self, end, address=None, pause=False):
        """Subscribes again (after a short pause if asked: the cluster is failing over); on
        failure waits a little and leaves it to the next call, within the caller's own
        deadline. Returns None."""
        if pause:
            time.sleep(max(min(0.05, end - time.monotonic()), 0))
        try:
            self._resubscribe(address)
        except (OSError, redis.RedisError):
            self._drop()
            time.sleep(max(min(0.05, end - time.monotonic()), 0))
        return None
