#include "resp/reader.hpp"

#include <hiredis/read.h>

#include <algorithm>
#include <memory>
#include <new>

#include "dlock/error.hpp"

namespace dlock::resp {
namespace {

// hiredis calls these as it parses. The root reply is heap-allocated and owned by us once
// redisReaderGetReply hands it over; a nested element is appended to its parent's vector.
// Elements arrive in order, and hiredis only uses the pointer of the container it is filling,
// whose address cannot change meanwhile (its own container grows only after it is complete).
// Growing as elements arrive, rather than sizing from the header, means a header claiming
// millions of elements costs nothing until they are actually received.
reply* place(const redisReadTask* task, reply&& value) noexcept {
  try {
    if (task->parent != nullptr) {
      auto& siblings = static_cast<reply*>(task->parent->obj)->elements();
      if (static_cast<std::size_t>(task->idx) != siblings.size()) return nullptr;
      siblings.push_back(std::move(value));
      return &siblings.back();
    }
    return new reply(std::move(value));
  } catch (const std::bad_alloc&) {
    return nullptr;  // hiredis reports out-of-memory as a reader error
  }
}

void* create_string(const redisReadTask* task, char* str, size_t len) {
  try {
    std::string text(str, len);
    switch (task->type) {
      case REDIS_REPLY_ERROR:
        return place(task, reply::make_error(std::move(text)));
      case REDIS_REPLY_STATUS:
        return place(task, reply::make_simple(std::move(text)));
      default:
        return place(task, reply::make_bulk(std::move(text)));
    }
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

void* create_array(const redisReadTask* task, int elements) {
  try {
    std::vector<reply> elems;
    elems.reserve(std::min<std::size_t>(static_cast<std::size_t>(elements), 16));
    return place(task, reply::make_array(std::move(elems)));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

void* create_integer(const redisReadTask* task, long long value) {
  return place(task, reply::make_integer(value));
}

void* create_nil(const redisReadTask* task) { return place(task, reply::make_nil()); }

// Only ever called on a root object (hiredis frees a partial reply on error or reader free).
void free_object(void* obj) { delete static_cast<reply*>(obj); }

redisReplyObjectFunctions functions{create_string, create_array, create_integer, create_nil,
                                    free_object};

}  // namespace

reader::reader() : r_{redisReaderCreateWithFunctions(&functions)} {
  if (r_ == nullptr) throw std::bad_alloc{};
}

reader::~reader() { redisReaderFree(r_); }

void reader::feed(std::string_view bytes) {
  // After a protocol error the reader refuses input; next() keeps reporting the error.
  if (bytes.empty() || r_->err != 0) return;
  if (redisReaderFeed(r_, bytes.data(), bytes.size()) != REDIS_OK) throw std::bad_alloc{};
}

std::optional<reply> reader::next(std::error_code& ec) {
  ec.clear();
  void* obj = nullptr;
  if (redisReaderGetReply(r_, &obj) != REDIS_OK) {
    ec = errc::protocol_error;
    return std::nullopt;
  }
  if (obj == nullptr) return std::nullopt;
  std::unique_ptr<reply> owned{static_cast<reply*>(obj)};
  return std::move(*owned);
}

void reader::reset() {
  redisReaderFree(r_);
  r_ = redisReaderCreateWithFunctions(&functions);
  if (r_ == nullptr) throw std::bad_alloc{};
}

}  // namespace dlock::resp
