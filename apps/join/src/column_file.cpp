// The column cache's file format: mapping, checking and writing (join/column_file.h).
#include "join/column_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

namespace join {

namespace {

constexpr std::string_view magic = "TSRJCOL1";
constexpr std::uint32_t format_version = 1;
constexpr std::uint32_t type_int64 = 1;
constexpr std::size_t header_bytes = 64;

struct file_header {
  std::array<char, 8> magic;
  std::uint32_t version;
  std::uint32_t type;
  std::uint64_t rows;
  std::uint64_t checksum;
  std::array<char, 32> reserved;
};
static_assert(sizeof(file_header) == header_bytes);

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw cache_error("column cache: " + path.string() + ": " + what);
}

/// Closes a file descriptor at the end of a scope.
struct fd_closer {
  explicit fd_closer(int descriptor) noexcept : fd(descriptor) {}
  fd_closer(const fd_closer&) = delete;
  fd_closer& operator=(const fd_closer&) = delete;
  ~fd_closer() { ::close(fd); }
  int fd;
};

}  // namespace

std::uint64_t column_checksum(std::span<const std::int64_t> values) noexcept {
  std::uint64_t sum = 0;
  std::uint64_t weight = 1;
  for (const std::int64_t v : values) {
    sum += static_cast<std::uint64_t>(v) * weight;
    weight += 2;
  }
  return sum;
}

column_file::column_file(const std::filesystem::path& path) : m_path(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(path, errno == ENOENT ? "missing (no such file; generate the cache again)"
                               : std::string("cannot open: ") + std::strerror(errno));
  }
  const fd_closer closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes < header_bytes) {
    fail(path, "truncated: " + std::to_string(bytes) + " bytes, less than the " +
                   std::to_string(header_bytes) + "-byte header");
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(errno));
  m_map = map;
  m_map_bytes = bytes;
  try {
    file_header h{};
    std::memcpy(&h, map, sizeof h);
    if (std::string_view(h.magic.data(), h.magic.size()) != magic)
      fail(path, "bad magic: not a column file of the join's cache");
    if (h.version != format_version)
      fail(path, "format version " + std::to_string(h.version) + ", expected " +
                     std::to_string(format_version));
    if (h.type != type_int64)
      fail(path, "value type " + std::to_string(h.type) + ", expected 1 (int64)");
    if (h.rows > (bytes - header_bytes) / sizeof(std::int64_t) ||
        header_bytes + h.rows * sizeof(std::int64_t) != bytes) {
      fail(path, "truncated or damaged: the header says " + std::to_string(h.rows) +
                     " rows, the file has " + std::to_string(bytes) + " bytes");
    }
    m_rows = h.rows;
    m_values = reinterpret_cast<const std::int64_t*>(static_cast<const char*>(map) + header_bytes);
    if (column_checksum(values()) != h.checksum) fail(path, "checksum mismatch: damaged values");
  } catch (...) {
    unmap();
    throw;
  }
}

column_file::column_file(column_file&& other) noexcept
    : m_path(std::move(other.m_path)),
      m_map(std::exchange(other.m_map, nullptr)),
      m_map_bytes(std::exchange(other.m_map_bytes, 0)),
      m_values(std::exchange(other.m_values, nullptr)),
      m_rows(std::exchange(other.m_rows, 0)) {}

column_file& column_file::operator=(column_file&& other) noexcept {
  if (this != &other) {
    unmap();
    m_path = std::move(other.m_path);
    m_map = std::exchange(other.m_map, nullptr);
    m_map_bytes = std::exchange(other.m_map_bytes, 0);
    m_values = std::exchange(other.m_values, nullptr);
    m_rows = std::exchange(other.m_rows, 0);
  }
  return *this;
}

column_file::~column_file() { unmap(); }

void column_file::unmap() noexcept {
  if (m_map != nullptr) ::munmap(m_map, m_map_bytes);
  m_map = nullptr;
  m_map_bytes = 0;
  m_values = nullptr;
  m_rows = 0;
}

void write_column_file(const std::filesystem::path& path, std::span<const std::int64_t> values) {
  file_header h{};
  std::memcpy(h.magic.data(), magic.data(), magic.size());
  h.version = format_version;
  h.type = type_int64;
  h.rows = values.size();
  h.checksum = column_checksum(values);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fail(path, std::string("cannot create: ") + std::strerror(errno));
  const bool ok = std::fwrite(&h, sizeof h, 1, f) == 1 &&
                  (values.empty() ||  // an empty span's data() may be null: fwrite's is not
                   std::fwrite(values.data(), sizeof(std::int64_t), values.size(), f) ==
                       values.size());
  if (std::fclose(f) != 0 || !ok) fail(path, "cannot write");
}

}  // namespace join
