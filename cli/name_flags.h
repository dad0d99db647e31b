// A CLI11 check for flags that name a pool or a group (trim --pool/--group, quota set --pool): the names a
// worker accepts (common/pool_name.h). A name no worker can have (not UTF-8, say) is a usage error (exit 2)
// here, before the coordinator's wire format refuses it with an empty INTERNAL error.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/pool_name.h"

namespace memcoord::cli {

// `what`: "pool name" or "group name", for the message.
inline CLI::Validator NameCheck(const char* what) {
  return CLI::Validator(
      [what](const std::string& value) {
        const Status checked = CheckName(value, what);
        return checked.ok() ? std::string() : checked.message();
      },
      "NAME");
}

}  // namespace memcoord::cli
