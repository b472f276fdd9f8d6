#include "dlock/reply.hpp"

#include <charconv>

namespace dlock {

std::optional<std::int64_t> reply::to_integer() const noexcept {
  if (kind_ == kind::integer) return integer_;
  if (!is_string() || text_.empty()) return std::nullopt;
  std::int64_t v = 0;
  const char* end = text_.data() + text_.size();
  auto [p, ec] = std::from_chars(text_.data(), end, v);
  if (ec != std::errc{} || p != end) return std::nullopt;
  return v;
}

std::string to_string(const reply& r) {
  switch (r.type()) {
    case reply::kind::nil:
      return "(nil)";
    case reply::kind::simple_string:
      return r.str();
    case reply::kind::error:
      return "(error) " + r.str();
    case reply::kind::integer:
      return "(integer) " + std::to_string(r.integer());
    case reply::kind::bulk_string:
      return "\"" + r.str() + "\"";
    case reply::kind::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < r.elements().size(); ++i) {
        if (i) out += ", ";
        out += to_string(r.elements()[i]);
      }
      return out + "]";
    }
  }
  return {};
}

}  // namespace dlock
