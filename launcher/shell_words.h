#pragma once
// Splitting one option string into words the way a POSIX shell would, without running one:
// `--mpi-args "-x FOO='a b' --oversubscribe"` is three words, -x, FOO=a b and --oversubscribe.
// Honoured: single quotes (literal), double quotes (\" \\ \$ \` escapes inside), backslash outside
// quotes. No expansion of $VAR, globs or ~. An unterminated quote or a trailing backslash is a
// UsageError naming `what` and the text.
#include <string>
#include <vector>

namespace dtrain::launcher {

std::vector<std::string> split_shell_words(const std::string& text, const std::string& what);

}  // namespace dtrain::launcher
