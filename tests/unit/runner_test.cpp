// scripts::evalsha_to_eval: the retry the runner sends after NOSCRIPT is the same call as EVAL
// with the script's text (a server that lacks the script runs it and caches it).
#include "scripts/runner.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "resp/encoder.hpp"

namespace {

TEST(runner, the_noscript_retry_is_the_same_call_as_eval_with_the_text) {
  const dlock::scripts::script s{"echo", "0123456789012345678901234567890123456789",
                                 "return {KEYS[1], ARGV[1], ARGV[2]}"};
  const std::vector<std::string_view> keys{"{orders}:1"}, argv{"30000", "owner:1"};
  const auto evalsha = dlock::scripts::encode_evalsha(s, keys, argv);
  EXPECT_EQ(evalsha, dlock::resp::encode_command(
                         {"EVALSHA", s.sha1, "1", "{orders}:1", "30000", "owner:1"}));
  EXPECT_EQ(dlock::scripts::evalsha_to_eval(s, evalsha),
            dlock::resp::encode_command({"EVAL", s.text, "1", "{orders}:1", "30000", "owner:1"}));
}

}  // namespace
