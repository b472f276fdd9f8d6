// dlock/dlock.hpp — everything: the client, its configuration, errors and replies.
#pragma once

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "dlock/counting_semaphore.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/inspect.hpp"
#include "dlock/keys.hpp"
#include "dlock/latch.hpp"
#include "dlock/lease.hpp"
#include "dlock/leased_semaphore.hpp"
#include "dlock/mutex.hpp"
#include "dlock/node_status.hpp"
#include "dlock/reply.hpp"
#include "dlock/shared_mutex.hpp"
