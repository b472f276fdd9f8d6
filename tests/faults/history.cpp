#include "history.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

namespace dlock::faults {

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

namespace {

void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char hex[] = "0123456789abcdef";
          out += "\\u00";
          out += hex[(c >> 4) & 0xf];
          out += hex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_key(std::string& out, std::string_view key) {
  out += ",\"";
  out += key;
  out += "\":";
}

template <class Int>
void append_int(std::string& out, std::string_view key, Int v) {
  append_key(out, key);
  out += std::to_string(v);
}

void append_text(std::string& out, std::string_view key, std::string_view v) {
  if (v.empty()) return;
  append_key(out, key);
  append_string(out, v);
}

// A flat JSON object: string, integer, true/false/null values. Enough for our own lines.
class flat_parser {
 public:
  explicit flat_parser(std::string_view s) : s_{s} {}

  bool parse(std::map<std::string, std::string>& strings,
             std::map<std::string, std::int64_t>& numbers) {
    skip_ws();
    if (!eat('{')) return false;
    skip_ws();
    if (eat('}')) return at_end();
    for (;;) {
      std::string key;
      skip_ws();
      if (!string_value(key)) return false;
      skip_ws();
      if (!eat(':')) return false;
      skip_ws();
      if (peek() == '"') {
        std::string v;
        if (!string_value(v)) return false;
        strings[key] = std::move(v);
      } else if (s_.substr(i_, 4) == "true") {
        i_ += 4;
        numbers[key] = 1;
      } else if (s_.substr(i_, 5) == "false") {
        i_ += 5;
        numbers[key] = 0;
      } else if (s_.substr(i_, 4) == "null") {
        i_ += 4;
      } else {
        std::int64_t v = 0;
        const auto* first = s_.data() + i_;
        const auto [ptr, ec] = std::from_chars(first, s_.data() + s_.size(), v);
        if (ec != std::errc{}) return false;
        i_ += static_cast<std::size_t>(ptr - first);
        numbers[key] = v;
      }
      skip_ws();
      if (eat(',')) continue;
      if (eat('}')) return at_end();
      return false;
    }
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool at_end() {
    skip_ws();
    return i_ == s_.size();
  }
  bool string_value(std::string& out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {  // only what to_json writes: \u00XX
          if (i_ + 4 > s_.size()) return false;
          unsigned v = 0;
          const auto [ptr, ec] = std::from_chars(s_.data() + i_, s_.data() + i_ + 4, v, 16);
          if (ec != std::errc{} || ptr != s_.data() + i_ + 4 || v > 0x7f) return false;
          out += static_cast<char>(v);
          i_ += 4;
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

std::string to_json(const event& e) {
  std::string out = "{\"t\":" + std::to_string(e.t) + ",\"p\":";
  append_string(out, e.proc);
  out += ",\"ev\":";
  append_string(out, e.kind);
  if (e.token != 0) append_int(out, "tok", e.token);
  if (!e.ok) {
    append_key(out, "ok");
    out += "false";
  }
  if (e.value != 0) append_int(out, "val", e.value);
  if (e.read != 0) append_int(out, "read", e.read);
  if (e.prev != 0) append_int(out, "prev", e.prev);
  if (e.left_ms >= 0) append_int(out, "left", e.left_ms);
  append_text(out, "detail", e.detail);
  append_text(out, "lock", e.lock);
  append_text(out, "op", e.op);
  if (e.unknown) {
    append_key(out, "unknown");
    out += "true";
  }
  append_text(out, "res", e.resource);
  append_text(out, "mode", e.mode);
  if (e.limit != 0) append_int(out, "lim", e.limit);
  out += '}';
  return out;
}

bool parse_event(std::string_view line, event& out) {
  std::map<std::string, std::string> strings;
  std::map<std::string, std::int64_t> numbers;
  if (!flat_parser{line}.parse(strings, numbers)) return false;
  if (!numbers.contains("t") || !strings.contains("p") || !strings.contains("ev")) return false;
  event e;
  e.t = numbers["t"];
  e.proc = strings["p"];
  e.kind = strings["ev"];
  if (auto it = numbers.find("tok"); it != numbers.end())
    e.token = static_cast<std::uint64_t>(it->second);
  if (auto it = numbers.find("ok"); it != numbers.end()) e.ok = it->second != 0;
  if (auto it = numbers.find("val"); it != numbers.end()) e.value = it->second;
  if (auto it = numbers.find("read"); it != numbers.end()) e.read = it->second;
  if (auto it = numbers.find("prev"); it != numbers.end()) e.prev = it->second;
  if (auto it = numbers.find("left"); it != numbers.end()) e.left_ms = it->second;
  if (auto it = strings.find("detail"); it != strings.end()) e.detail = it->second;
  if (auto it = strings.find("lock"); it != strings.end()) e.lock = it->second;
  if (auto it = strings.find("op"); it != strings.end()) e.op = it->second;
  if (auto it = numbers.find("unknown"); it != numbers.end()) e.unknown = it->second != 0;
  if (auto it = strings.find("res"); it != strings.end()) e.resource = it->second;
  if (auto it = strings.find("mode"); it != strings.end()) e.mode = it->second;
  if (auto it = numbers.find("lim"); it != numbers.end()) e.limit = it->second;
  out = std::move(e);
  return true;
}

history_writer::history_writer(const std::string& path, std::string proc) : proc_{std::move(proc)} {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error{"cannot open " + path + ": " + std::strerror(errno)};
}

history_writer::~history_writer() {
  if (fd_ >= 0) ::close(fd_);
}

std::int64_t history_writer::record(event e) {
  if (e.proc.empty()) e.proc = proc_;
  std::lock_guard lock{mu_};
  // Stamped under the lock, so one writer's lines are in time order.
  if (e.t == 0) e.t = monotonic_ns();
  const auto line = to_json(e) + '\n';
  std::size_t done = 0;
  while (done < line.size()) {
    const auto n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // a full disk: the checker then sees a short history
    done += static_cast<std::size_t>(n);
  }
  return e.t;
}

std::vector<event> read_history(const std::string& path, std::size_t* bad_lines) {
  std::vector<event> out;
  std::ifstream in{path};
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    event e;
    if (parse_event(line, e)) {
      out.push_back(std::move(e));
    } else if (bad_lines) {
      ++*bad_lines;
    }
  }
  return out;
}

std::vector<event> read_histories(const std::string& dir, std::size_t* bad_lines) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator{dir}) {
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<event> all;
  for (const auto& f : files) {
    auto part = read_history(f, bad_lines);
    all.insert(all.end(), std::make_move_iterator(part.begin()),
               std::make_move_iterator(part.end()));
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const event& a, const event& b) { return a.t < b.t; });
  return all;
}

}  // namespace dlock::faults
