// server::reply_writer — see resp_writer.h.
#include "resp_writer.h"

#include <charconv>

namespace server {

void reply_writer::header(char type, long long n) {
  char buf[24];
  buf[0] = type;
  auto [end, ec] = std::to_chars(buf + 1, buf + sizeof(buf) - 2, n);
  (void)ec;  // 20 digits and a sign fit
  *end++ = '\r';
  *end++ = '\n';
  m_out->append(buf, end);
}

void reply_writer::simple(std::string_view text) {
  m_out->push_back('+');
  m_out->append(text);
  m_out->append("\r\n");
}

void reply_writer::error(std::string_view text) {
  m_out->push_back('-');
  // An error line cannot hold a line end: Redis replaces CR and LF by blanks (addReplyErrorLength).
  for (const char c : text) m_out->push_back(c == '\r' || c == '\n' ? ' ' : c);
  m_out->append("\r\n");
}

void reply_writer::integer(long long v) { header(':', v); }

void reply_writer::bulk(std::string_view bytes) {
  header('$', static_cast<long long>(bytes.size()));
  m_out->append(bytes);
  m_out->append("\r\n");
}

void reply_writer::null() {
  m_out->append(m_proto == protocol::resp3 ? std::string_view("_\r\n") : "$-1\r\n");
}

void reply_writer::null_array() {
  m_out->append(m_proto == protocol::resp3 ? std::string_view("_\r\n") : "*-1\r\n");
}

void reply_writer::array(std::size_t n) { header('*', static_cast<long long>(n)); }

void reply_writer::map(std::size_t n) {
  if (m_proto == protocol::resp3) {
    header('%', static_cast<long long>(n));
  } else {
    header('*', 2 * static_cast<long long>(n));
  }
}

void reply_writer::set(std::size_t n) {
  header(m_proto == protocol::resp3 ? '~' : '*', static_cast<long long>(n));
}

void reply_writer::verbatim(std::string_view text) {
  if (m_proto != protocol::resp3) {
    bulk(text);
    return;
  }
  header('=', static_cast<long long>(text.size()) + 4);
  m_out->append("txt:");
  m_out->append(text);
  m_out->append("\r\n");
}

}  // namespace server
