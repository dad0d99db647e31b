// Writes a JSON value as a Python pickle (protocol 2), so Python's pickle.load returns the same structure:
// objects become dicts, arrays lists, strings str, integers int (any size up to 64 bits), floats float,
// booleans bool, null None. Enough for PyTorch's memory snapshot (torch.cuda.memory._snapshot()), which
// holds only those types. No memo, no classes: nothing in the output runs code when loaded.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace memcoord::cli {

std::string ToPickle(const nlohmann::json& value);

}  // namespace memcoord::cli
