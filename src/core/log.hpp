// Minimal leveled logging to stderr. The level is process-wide (the most
// verbose level asked for by any live context wins until it is lowered).
#pragma once

#include <string>

#include "core/error.hpp"

namespace genie {

enum class LogLevel { Off = 0, Error = 1, Warn = 2, Info = 3, Debug = 4, Trace = 5 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, const std::string& msg);

template <class... Parts>
void log(LogLevel level, Parts&&... parts) {
  if (static_cast<int>(level) <= static_cast<int>(log_level())) log_write(level, cat(std::forward<Parts>(parts)...));
}

}  // namespace genie
