#include "runtime/io/json_value.h"

#include <cerrno>
#include <cstdlib>
#include <unordered_set>

#include "runtime/base/error.h"

namespace dtrain::runtime {

class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  JsonValue document() {
    JsonValue v = value(0);
    skip_space();
    if (at_ < text_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    DTRAIN_USAGE_FAIL() << what_ << ": " << problem << " at byte " << at_;
  }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
      ++at_;
  }
  bool take(char c) {
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  void literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) fail("invalid literal");
    at_ += word.size();
  }

  JsonValue value(int depth) {
    if (depth > JsonValue::kMaxDepth) fail("nesting deeper than " + std::to_string(JsonValue::kMaxDepth));
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end of the JSON text");
    JsonValue v;
    const char c = text_[at_];
    if (c == '{') {
      v.type_ = JsonValue::Type::kObject;
      ++at_;
      skip_space();
      if (take('}')) return v;
      // A set, not a scan of the members: a header of millions of keys must not take hours.
      std::unordered_set<std::string> keys;
      do {
        skip_space();
        const size_t key_at = at_;
        if (at_ >= text_.size() || text_[at_] != '"') fail("expected a string key");
        std::string key = string();
        if (!keys.insert(key).second) {
          at_ = key_at;
          fail("duplicate key \"" + key + "\"");
        }
        skip_space();
        expect(':');
        v.object_.emplace_back(std::move(key), value(depth + 1));
        skip_space();
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      v.type_ = JsonValue::Type::kArray;
      ++at_;
      skip_space();
      if (take(']')) return v;
      do {
        v.array_.push_back(value(depth + 1));
        skip_space();
      } while (take(','));
      expect(']');
    } else if (c == '"') {
      v.type_ = JsonValue::Type::kString;
      v.text_ = string();
    } else if (c == 't') {
      literal("true");
      v.type_ = JsonValue::Type::kBool;
      v.bool_ = true;
    } else if (c == 'f') {
      literal("false");
      v.type_ = JsonValue::Type::kBool;
    } else if (c == 'n') {
      literal("null");
    } else {
      v.type_ = JsonValue::Type::kNumber;
      v.text_ = number();
    }
    return v;
  }

  // RFC 8259's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  std::string number() {
    const size_t begin = at_;
    auto digits = [&] {
      const size_t from = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      return at_ - from;
    };
    take('-');
    if (take('0')) {
      if (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') fail("a number with a leading zero");
    } else if (digits() == 0) {
      fail("invalid value");
    }
    if (take('.') && digits() == 0) fail("a number without digits after '.'");
    if (take('e') || take('E')) {
      if (!take('+')) take('-');
      if (digits() == 0) fail("a number without exponent digits");
    }
    return std::string(text_.substr(begin, at_ - begin));
  }

  unsigned hex4() {
    if (at_ + 4 > text_.size()) fail("a truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[at_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<unsigned>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<unsigned>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<unsigned>(h - 'A' + 10);
      } else {
        fail("a bad \\u escape");
      }
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // One well-formed UTF-8 sequence copied from the text (no overlong forms, no surrogates).
  void utf8_sequence(std::string& out) {
    const auto lead = static_cast<unsigned char>(text_[at_]);
    const int extra = lead >= 0xF0 && lead <= 0xF4   ? 3
                      : lead >= 0xE0 && lead <= 0xEF ? 2
                      : lead >= 0xC2 && lead <= 0xDF ? 1
                                                     : -1;  // 0x80-0xC1 and 0xF5-0xFF never lead
    if (extra < 0 || at_ + static_cast<size_t>(extra) >= text_.size()) fail("invalid UTF-8 in a string");
    unsigned cp = lead & (0x3F >> extra);
    for (int i = 1; i <= extra; ++i) {
      const auto b = static_cast<unsigned char>(text_[at_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 in a string");
      cp = (cp << 6) | (b & 0x3F);
    }
    const unsigned least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 in a string");
    out.append(text_.substr(at_, static_cast<size_t>(extra) + 1));
    at_ += static_cast<size_t>(extra) + 1;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_ >= text_.size()) fail("an unterminated string");
      const char c = text_[at_];
      if (c == '"') {
        ++at_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (static_cast<unsigned char>(c) >= 0x80) {
        utf8_sequence(out);
        continue;
      }
      ++at_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) fail("an unterminated string");
      const char e = text_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a lone low surrogate in a string");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!(take('\\') && take('u'))) fail("a lone high surrogate in a string");
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a lone high surrogate in a string");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail("a bad escape in a string");
      }
    }
  }

  std::string_view text_;
  const std::string& what_;
  size_t at_ = 0;
};

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& member : object_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

bool JsonValue::as_int64(int64_t* out) const {
  if (type_ != Type::kNumber || text_.find_first_of(".eE") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text_.c_str(), &end, 10);
  if (errno == ERANGE || end != text_.c_str() + text_.size()) return false;
  *out = v;
  return true;
}

const char* JsonValue::describe(Type t) {
  switch (t) {
    case Type::kNull: return "null";
    case Type::kBool: return "a boolean";
    case Type::kNumber: return "a number";
    case Type::kString: return "a string";
    case Type::kArray: return "an array";
    case Type::kObject: return "an object";
  }
  return "a value";
}

JsonValue parse_json(std::string_view text, const std::string& what) {
  return JsonParser(text, what).document();
}

}  // namespace dtrain::runtime
