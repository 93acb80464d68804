// server::inner_node — see inner_node.h.
#include "inner_node.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include "byte_word.h"

namespace server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "inner_node compares heap words as little-endian byte sequences");

constexpr std::size_t words_for(std::size_t bytes) noexcept { return (bytes + 7) / 8; }

/// -1, 0, 1: `key` against the `size` bytes held in `words` (read racily).
int compare_words(std::string_view key, const std::uint64_t* words, std::size_t size) noexcept {
  const std::size_t n = std::min(key.size(), size);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t a = 0;
    std::memcpy(&a, key.data() + i, 8);
    const std::uint64_t b = tessera::racy_load(words[i / 8]);
    if (a != b) return __builtin_bswap64(a) < __builtin_bswap64(b) ? -1 : 1;
  }
  if (i < n) {
    const std::size_t rest = n - i;  // 1..7
    const std::uint64_t a = load_bytes(key.data() + i, rest);
    const std::uint64_t mask = (std::uint64_t{1} << (8 * rest)) - 1;
    const std::uint64_t b = tessera::racy_load(words[i / 8]) & mask;
    if (a != b) return __builtin_bswap64(a) < __builtin_bswap64(b) ? -1 : 1;
  }
  if (key.size() == size) return 0;
  return key.size() < size ? -1 : 1;
}

/// Bytes [at, at + 8) of `bytes`, zero-padded, as a big-endian word: for byte strings that
/// share their first `at` bytes, different heads order them as their bytes do (a string that
/// ends first is padded with zeros, below every byte but 0, and equal words decide nothing).
std::uint64_t head_of(std::string_view bytes, std::size_t at) noexcept {
  if (at >= bytes.size()) return 0;
  return __builtin_bswap64(
      load_bytes(bytes.data() + at, std::min<std::size_t>(8, bytes.size() - at)));
}

const long_separator* load_long(const long_separator* const& field) noexcept {
  // acquire: the separator's bytes were written before the release store in encode().
  return std::atomic_ref<const long_separator*>(const_cast<const long_separator*&>(field))
      .load(std::memory_order_acquire);
}

}  // namespace

const long_separator* long_separator_store::make(std::string_view bytes) {
  auto s = std::make_unique<long_separator>();
  s->size = bytes.size();
  s->words.assign(words_for(bytes.size()), 0);
  std::memcpy(s->words.data(), bytes.data(), bytes.size());
  const std::lock_guard<std::mutex> lock(m_mutex);
  m_all.push_back(std::move(s));
  return m_all.back().get();
}

std::size_t inner_node::count() const noexcept {
  return std::min<std::size_t>(tessera::racy_load(m_count), max_separators);
}

void* inner_node::child(std::size_t i) const noexcept {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(
      tessera::racy_load(m_children[std::min(i, max_separators)])));
}

int inner_node::compare_ref(std::string_view key, std::uint64_t ref,
                            const long_separator* const* lng) const noexcept {
  if ((ref & long_bit) != 0) {
    const long_separator* s = load_long(*lng);
    if (s == nullptr) return 0;  // torn
    return compare_words(key, s->words.data(), s->size);
  }
  const std::size_t size = ref & 0xFFFFFFFFU;
  const std::size_t off = (ref >> 32) & 0xFFFFU;
  if (off > heap_words || words_for(size) > heap_words - off) return 0;  // torn
  return compare_words(key, m_heap + off, size);
}

int inner_node::compare(std::string_view key, std::size_t i) const noexcept {
  i = std::min(i, max_separators - 1);
  return compare_ref(key, tessera::racy_load(m_refs[i]), &m_long[i]);
}

bool inner_node::beyond(std::string_view key) const noexcept {
  const std::uint64_t ref = tessera::racy_load(m_high);
  if ((ref & infinite_bit) != 0) return false;
  return compare_ref(key, ref, &m_high_long) >= 0;
}

int inner_node::compare_prefix(std::string_view key, std::size_t size) const noexcept {
  if (size <= prefix_inline) {
    // The prefix's words in the header (at most two); a key shorter than the prefix compares its
    // bytes, then as below it.
    const auto mask_of = [](std::size_t bytes) noexcept {  // the low `bytes` (<= 8) bytes
      return bytes >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
    };
    if (key.size() >= prefix_inline) {
      // Both words of the key at once (the common case), each masked to the prefix's bytes.
      std::uint64_t a[2] = {};
      std::memcpy(a, key.data(), sizeof a);
      const std::uint64_t m0 = mask_of(size);
      const std::uint64_t m1 = size > 8 ? mask_of(size - 8) : 0;
      const std::uint64_t b0 = tessera::racy_load(m_prefix_words[0]) & m0;
      const std::uint64_t b1 = tessera::racy_load(m_prefix_words[1]) & m1;
      if ((a[0] & m0) != b0) return __builtin_bswap64(a[0] & m0) < __builtin_bswap64(b0) ? -1 : 1;
      if ((a[1] & m1) != b1) return __builtin_bswap64(a[1] & m1) < __builtin_bswap64(b1) ? -1 : 1;
      return 0;
    }
    const std::size_t n = std::min(size, key.size());
    for (std::size_t i = 0; i < n; i += 8) {
      const std::size_t m = std::min<std::size_t>(8, n - i);
      const std::uint64_t a = load_bytes(key.data() + i, m);
      const std::uint64_t b = tessera::racy_load(m_prefix_words[i / 8]) & mask_of(m);
      if (a != b) return __builtin_bswap64(a) < __builtin_bswap64(b) ? -1 : 1;
    }
    return key.size() < size ? -1 : 0;
  }
  const std::uint64_t ref = tessera::racy_load(m_refs[0]);
  const std::uint64_t* words = nullptr;
  std::size_t sep_size = ref & 0xFFFFFFFFU;
  if ((ref & long_bit) != 0) {
    const long_separator* s = load_long(m_long[0]);
    if (s == nullptr) return 0;  // torn
    words = s->words.data();
    sep_size = s->size;
  } else {
    const std::size_t off = (ref >> 32) & 0xFFFFU;
    if (off > heap_words || words_for(sep_size) > heap_words - off) return 0;  // torn
    words = m_heap + off;
  }
  size = std::min(size, sep_size);
  return compare_words(key.substr(0, std::min(size, key.size())), words, size);
}

void* inner_node::child_for(std::string_view key) const noexcept {
  const std::size_t n = count();
  if (n == 0) return child(0);
  // upper_bound: the first separator > key. Every separator starts with the shared prefix: a
  // key below it (or a prefix of it) goes to child 0, one above it to the last child.
  const std::size_t prefix = tessera::racy_load(m_prefix);
  const int c = compare_prefix(key, prefix);
  if (c < 0) return child(0);
  if (c > 0) return child(n);
  const std::uint64_t h = head_of(key, prefix);
  std::size_t lo = 0;
  std::size_t hi = n;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    const std::uint64_t sh = tessera::racy_load(m_heads[mid]);
    if (sh != h ? h > sh : compare(key, mid) >= 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return child(lo);
}

std::string inner_node::bytes_of(std::uint64_t ref, const long_separator* const* lng) const {
  const std::size_t size = ref & 0xFFFFFFFFU;
  std::string out(size, '\0');
  const std::uint64_t* words = nullptr;
  if ((ref & long_bit) != 0) {
    const long_separator* s = load_long(*lng);
    if (s == nullptr || s->size != size) return {};  // torn
    words = s->words.data();
  } else {
    const std::size_t off = (ref >> 32) & 0xFFFFU;
    if (off > heap_words || words_for(size) > heap_words - off) return {};  // torn
    words = m_heap + off;
  }
  for (std::size_t i = 0; i < size; i += 8) {
    const std::uint64_t w = tessera::racy_load(words[i / 8]);
    std::memcpy(out.data() + i, &w, std::min<std::size_t>(8, size - i));
  }
  return out;
}

std::string inner_node::separator(std::size_t i) const {
  i = std::min(i, max_separators - 1);
  return bytes_of(tessera::racy_load(m_refs[i]), &m_long[i]);
}

// ---- writers: decode, change, encode --------------------------------------------------------

inner_image decode(const inner_node& n) {
  inner_image img;
  img.level = n.level();
  const std::size_t count = n.count();
  img.seps.reserve(count + 1);
  img.children.reserve(count + 2);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t ref = tessera::racy_load(n.m_refs[i]);
    image_separator s{n.bytes_of(ref, &n.m_long[i]), nullptr};
    if ((ref & inner_node::long_bit) != 0) s.lng = load_long(n.m_long[i]);
    img.seps.push_back(std::move(s));
  }
  for (std::size_t i = 0; i <= count; ++i) img.children.push_back(n.child(i));
  const std::uint64_t high = tessera::racy_load(n.m_high);
  img.high_infinite = (high & inner_node::infinite_bit) != 0;
  if (!img.high_infinite) {
    img.high.bytes = n.bytes_of(high, &n.m_high_long);
    if ((high & inner_node::long_bit) != 0) img.high.lng = load_long(n.m_high_long);
  }
  img.right = n.right();
  return img;
}

namespace {
std::size_t heap_words_of(const image_separator& s) noexcept {
  return s.bytes.size() > inner_node::inline_max ? 0 : words_for(s.bytes.size());
}
}  // namespace

bool fits(const inner_image& img) noexcept {
  if (img.seps.size() > inner_node::max_separators) return false;
  std::size_t words = img.high_infinite ? 0 : heap_words_of(img.high);
  for (const auto& s : img.seps) words += heap_words_of(s);
  return words <= inner_node::heap_words;
}

void encode(inner_node& n, const inner_image& img, long_separator_store& store) {
  if (!fits(img)) throw std::logic_error("server::encode: the image does not fit in a node");
  std::size_t top = 0;
  auto put = [&](const image_separator& s, std::uint64_t& ref, const long_separator*& lng) {
    const std::size_t size = s.bytes.size();
    if (size > inner_node::inline_max) {
      const long_separator* p = s.lng != nullptr ? s.lng : store.make(s.bytes);
      // release: the separator's bytes are complete before a reader can load the pointer.
      std::atomic_ref<const long_separator*>(lng).store(p, std::memory_order_release);
      tessera::racy_store(ref, inner_node::long_bit | size);
      return;
    }
    for (std::size_t i = 0; i < size; i += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, s.bytes.data() + i, std::min<std::size_t>(8, size - i));
      tessera::racy_store(n.m_heap[top + i / 8], w);
    }
    tessera::racy_store(ref, (static_cast<std::uint64_t>(top) << 32) | size);
    top += words_for(size);
  };
  for (std::size_t i = 0; i < img.seps.size(); ++i) put(img.seps[i], n.m_refs[i], n.m_long[i]);
  std::size_t prefix = img.seps.empty() ? 0 : img.seps.front().bytes.size();
  for (std::size_t i = 1; i < img.seps.size() && prefix > 0; ++i) {
    const std::string& a = img.seps.front().bytes;
    const std::string& b = img.seps[i].bytes;
    std::size_t k = 0;
    while (k < prefix && k < b.size() && a[k] == b[k]) ++k;
    prefix = k;
  }
  for (std::size_t i = 0; i < img.seps.size(); ++i) {
    tessera::racy_store(n.m_heads[i], head_of(img.seps[i].bytes, prefix));
  }
  tessera::racy_store(n.m_prefix, static_cast<std::uint32_t>(prefix));
  const std::string_view shared =
      img.seps.empty() ? std::string_view()
                       : std::string_view(img.seps.front().bytes)
                             .substr(0, std::min(prefix, inner_node::prefix_inline));
  for (std::size_t i = 0; i < 2; ++i) {
    const std::size_t at = 8 * i;
    const std::size_t m = at < shared.size() ? std::min<std::size_t>(8, shared.size() - at) : 0;
    tessera::racy_store(n.m_prefix_words[i], m == 0 ? 0 : load_bytes(shared.data() + at, m));
  }
  for (std::size_t i = 0; i < img.children.size(); ++i) {
    const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(img.children[i]));
    tessera::racy_store(n.m_children[i], bits);
  }
  if (img.high_infinite) {
    tessera::racy_store(n.m_high, inner_node::infinite_bit);
  } else {
    put(img.high, n.m_high, n.m_high_long);
  }
  tessera::racy_store(n.m_right, img.right);
  tessera::racy_store(n.m_count, static_cast<std::uint16_t>(img.seps.size()));
}

void inner_image::insert(std::string sep, void* right_child) {
  const auto pos = std::upper_bound(
      seps.begin(), seps.end(), sep,
      [](const std::string& k, const image_separator& s) { return k < s.bytes; });
  const auto at = pos - seps.begin();
  seps.insert(pos, image_separator{std::move(sep), nullptr});
  children.insert(children.begin() + at + 1, right_child);
}

image_separator inner_image::split(inner_image& right_half) {
  // The split point that balances both halves' use of the node (separator slots and heap
  // words, as fractions of the node's), so that long separators cannot leave one side full.
  const std::size_t n = seps.size();
  if (n < 2) throw std::logic_error("server::inner_image::split: fewer than two separators");
  std::vector<std::size_t> prefix(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + heap_words_of(seps[i]);
  const std::size_t high_words = high_infinite ? 0 : heap_words_of(high);
  constexpr std::size_t slots = inner_node::max_separators;
  constexpr std::size_t heap = inner_node::heap_words;
  std::size_t best = 0;
  std::size_t best_load = SIZE_MAX;
  for (std::size_t m = 0; m < n; ++m) {
    const std::size_t left_words = prefix[m] + heap_words_of(seps[m]);
    const std::size_t right_words = prefix[n] - prefix[m + 1] + high_words;
    const std::size_t load = std::max({left_words * slots, right_words * slots, m * heap,
                                       (n - 1 - m) * heap});
    if (load < best_load) {
      best_load = load;
      best = m;
    }
  }
  right_half.level = level;
  const auto cut = static_cast<std::ptrdiff_t>(best) + 1;
  right_half.seps.assign(std::make_move_iterator(seps.begin() + cut),
                         std::make_move_iterator(seps.end()));
  right_half.children.assign(children.begin() + cut, children.end());
  right_half.high_infinite = high_infinite;
  right_half.high = std::move(high);
  right_half.right = right;
  image_separator up = std::move(seps[best]);
  seps.resize(best);
  children.resize(best + 1);
  high = up;
  high_infinite = false;
  return up;
}

}  // namespace server
