// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <string_view>

namespace epochcast {

// The length of the well-formed UTF-8 character at the start of `text`, or 0 when it starts
// with none (or is empty).
std::size_t utf8_length(std::string_view text);

// The offset of the first byte of `text` that starts no well-formed character, or npos.
std::size_t first_non_utf8(std::string_view text);

}  // namespace epochcast
