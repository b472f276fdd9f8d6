// The fixture of the transport::pipeline tests (pipeline_*_test.cpp): the request/reply state
// machine of a command connection, step by step. Each request's payload is "<tag>;", so written
// bytes show which requests were written, and its handler records its completion under its tag.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "reply_printer.hpp"
#include "transport/pipeline.hpp"

namespace dlock::test::pipeline_fixture {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::reply;
using dlock::transport::pipeline;
using dlock::transport::reply_handler;
using dlock::transport::request;
using time_point = dlock::transport::clock::time_point;

struct call {
  int tag;
  std::error_code ec;
  reply value;
};

class pipeline_test : public testing::Test {
 protected:
  // A handler recording its completions under `tag`.
  reply_handler record(int tag) {
    return [this, tag](std::error_code ec, reply r) { calls_.push_back({tag, ec, std::move(r)}); };
  }

  // A request whose payload is "<tag>;" so that written bytes show which requests were written.
  request make(int tag, time_point deadline, time_point link_deadline = time_point::max()) {
    request r;
    r.payload = payload(tag);
    r.deadline = deadline;
    r.link_deadline = link_deadline;
    r.handler = record(tag);
    return r;
  }
  static std::string payload(int tag) { return std::to_string(tag) + ";"; }

  void push(int tag, time_point deadline, time_point link_deadline = time_point::max()) {
    pipe_.push(make(tag, deadline, link_deadline));
  }

  std::string take_writes() {
    std::string out;
    pipe_.take_writes(out);
    return out;
  }

  std::vector<int> tags() const {
    std::vector<int> out;
    for (const auto& c : calls_) out.push_back(c.tag);
    return out;
  }

  const time_point t0_ = dlock::transport::clock::now();
  const time_point far_ = t0_ + 1h;
  pipeline pipe_;
  std::vector<call> calls_;
};

}  // namespace dlock::test::pipeline_fixture
