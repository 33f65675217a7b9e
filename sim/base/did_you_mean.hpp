#pragma once
// "Did you mean" for a name the user mistyped (a parameter, key, op, preset or model): the one place that
// decides which known name, if any, to suggest. Every error about an unknown name appends did_you_mean(...).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fabricsim {

// Optimal-string-alignment distance (insertions, deletions, substitutions and swaps of two neighbours, each 1),
// case-insensitive.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The known name `name` most likely stands for: among the known names that hold every word of `name` in order
// (words split at '_' and '-'; tensor_parallel_size in tensor_model_parallel_size) or start with it, the nearest
// by edit distance; without such names, the nearest known name when at most a third of the shorter name's
// length away (at least 1; for a name of 1 or 2 characters, only a change of case). Equally near names: the one of `name`'s length,
// else none. "" when nothing qualifies, and for a name that is itself known.
std::string closest_name(std::string_view name, const std::vector<std::string>& known);

// " (did you mean 'x'?)" for closest_name's answer, "" when it has none.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);

}  // namespace fabricsim
