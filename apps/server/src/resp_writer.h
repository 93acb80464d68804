#pragma once
// server::reply_writer — the Redis protocol's reply side: appends RESP2 or RESP3 replies to a
// byte string. RESP3 (after HELLO 3) differs in nulls ("_"), maps ("%"), sets ("~"), doubles
// and booleans; in RESP2 a map is an array of 2n elements and a null is "$-1" (a null array
// "*-1").
//
//   std::string out;
//   server::reply_writer w(out, server::protocol::resp2);
//   w.array(2); w.bulk("a"); w.null();      // "*2\r\n$1\r\na\r\n$-1\r\n"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace server {

enum class protocol : std::uint8_t { resp2 = 2, resp3 = 3 };

class reply_writer {
 public:
  reply_writer(std::string& out, protocol proto) noexcept : m_out(&out), m_proto(proto) {}

  [[nodiscard]] protocol proto() const noexcept { return m_proto; }
  [[nodiscard]] std::string& buffer() noexcept { return *m_out; }

  /// "+text": text must hold no CR or LF.
  void simple(std::string_view text);
  /// "-text": text is the whole message with its prefix ("ERR ...", "NOAUTH ...").
  void error(std::string_view text);
  void integer(long long v);
  void bulk(std::string_view bytes);
  /// A missing value: "$-1" (RESP2) or "_" (RESP3).
  void null();
  /// A missing array: "*-1" (RESP2) or "_" (RESP3).
  void null_array();
  void array(std::size_t n);
  /// n key/value pairs follow: "%n" (RESP3) or "*2n" (RESP2).
  void map(std::size_t n);
  /// n elements: "~n" (RESP3) or "*n" (RESP2).
  void set(std::size_t n);
  /// RESP3 verbatim text ("=n\r\ntxt:..."); RESP2 a bulk string.
  void verbatim(std::string_view text);
  void ok() { m_out->append("+OK\r\n"); }

 private:
  void header(char type, long long n);
  std::string* m_out;
  protocol m_proto;
};

/// One `key:value` line of INFO's text (the body of its bulk reply).
inline void append_info_field(std::string& out, std::string_view key, std::string_view value) {
  out.append(key);
  out += ':';
  out.append(value);
  out += "\r\n";
}

}  // namespace server
