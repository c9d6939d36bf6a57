#include "launcher/shell_words.h"

#include <cctype>

#include "runtime/base/error.h"

namespace dtrain::launcher {

std::vector<std::string> split_shell_words(const std::string& text, const std::string& what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // '' is a word of its own, so track it apart from word.empty()
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const size_t end = text.find('\'', i + 1);
      DTRAIN_USAGE_CHECK(end != std::string::npos) << what << " '" << text << "': unterminated single quote";
      word += text.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        const bool escape = text[j] == '\\' && j + 1 < text.size() &&
                            (text[j + 1] == '"' || text[j + 1] == '\\' || text[j + 1] == '$' || text[j + 1] == '`');
        if (escape) ++j;
        word += text[j];
      }
      DTRAIN_USAGE_CHECK(j < text.size()) << what << " '" << text << "': unterminated double quote";
      in_word = true;
      i = j;
    } else if (c == '\\') {
      DTRAIN_USAGE_CHECK(i + 1 < text.size()) << what << " '" << text << "': ends in a lone backslash";
      word += text[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace dtrain::launcher
