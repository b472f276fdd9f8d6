// Lets GoogleTest print dlock::reply values in failure messages.
#pragma once

#include <ostream>

#include "dlock/reply.hpp"

namespace dlock {

inline void PrintTo(const reply& r, std::ostream* os) { *os << to_string(r); }

}  // namespace dlock
