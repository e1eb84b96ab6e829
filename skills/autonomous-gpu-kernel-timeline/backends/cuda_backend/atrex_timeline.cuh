// atrex_timeline.cuh - intra-kernel timeline probe, ATREXLT1 buffer ABI 1.0.
//
// Buffer: 64-byte header | capacity x 16-byte records | owner_count x 8-byte claim words.
// One Recorder per owner (a writer thread of a CTA) per launch. The constructor claims the
// owner's slot range once with compare-and-swap; each event afterwards is one %globaltimer
// read and one 16-byte store from the writer lane: no atomics, no fences, no shared memory.
// (Holding the first record of a begin/end pair in registers and writing both as one
// 32-byte sector was measured on an H200 and cost more, so each record is stored at once.)
// A full range sets the sticky overflow bit and stops recording (never wraps).
// Without ATREX_TIMELINE_ENABLED every member compiles to nothing and the buffer is untouched.
#pragma once

namespace atrex {
namespace timeline {

enum Kind : unsigned int { kBegin = 0u, kEnd = 1u, kInstant = 2u, kCounter = 3u };

enum Status : unsigned int {
  kOverflow = 1u, kBadHeader = 2u, kBadOwner = 4u, kBadSm = 8u, kDuplicateOwner = 16u
};

#ifdef ATREX_TIMELINE_ENABLED

struct Header {
  unsigned long long magic;
  unsigned short abi_major, abi_minor, header_bytes, record_bytes;
  unsigned int capacity, owner_count, records_per_owner, status;
  unsigned int grid_x, grid_y, grid_z, block_x, block_y, block_z;
  unsigned long long launch_id;
};
static_assert(sizeof(Header) == 64, "ATREXLT1 header is 64 bytes");

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned int smid() {
  unsigned int s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

class Recorder {
 public:
  // writer_ordinal: this owner's ordinal among the CTA's writers (the manifest's `ordinal`);
  // is_writer: true in exactly the one thread the manifest names for that ordinal.
  __device__ __forceinline__ Recorder(void* buffer, unsigned int writer_ordinal, bool is_writer)
      : next_(nullptr), left_(0u), tag_(0u), status_(nullptr), live_(false) {
    if (!is_writer || buffer == nullptr) return;
    Header* h = static_cast<Header*>(buffer);
    status_ = &h->status;
    const unsigned int ctas = gridDim.x * gridDim.y * gridDim.z;
    if (h->magic != 0x31544C5845525441ull || h->abi_major != 1u || h->header_bytes != 64u ||
        h->record_bytes != 16u || h->capacity != h->owner_count * h->records_per_owner ||
        h->grid_x != gridDim.x || h->grid_y != gridDim.y || h->grid_z != gridDim.z ||
        h->block_x != blockDim.x || h->block_y != blockDim.y || h->block_z != blockDim.z) {
      atomicOr(status_, static_cast<unsigned int>(kBadHeader));
      return;
    }
    const unsigned int writers = ctas == 0u ? 0u : h->owner_count / ctas;
    if (writers == 0u || writers * ctas != h->owner_count || writer_ordinal >= writers) {
      atomicOr(status_, static_cast<unsigned int>(kBadOwner));
      return;
    }
    const unsigned int cta = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    const unsigned int owner = cta * writers + writer_ordinal;
    unsigned char* base = static_cast<unsigned char*>(buffer);
    unsigned long long* claims =
        reinterpret_cast<unsigned long long*>(base + 64ull + 16ull * h->capacity);
    const unsigned long long claim =
        (static_cast<unsigned long long>(cta + 1u) << 32) | static_cast<unsigned long long>(thread + 1u);
    if (atomicCAS(claims + owner, 0ull, claim) != 0ull) {
      atomicOr(status_, static_cast<unsigned int>(kDuplicateOwner));
      return;
    }
    const unsigned int sm = smid();
    if (sm > 0x3FFu) {
      atomicOr(status_, static_cast<unsigned int>(kBadSm));
      return;
    }
    next_ = reinterpret_cast<uint4*>(base + 64ull) + static_cast<unsigned long long>(owner) * h->records_per_owner;
    left_ = h->records_per_owner;
    tag_ = 0x80000000u | (sm << 18);
    live_ = true;
  }

  __device__ __forceinline__ void begin(unsigned int site, unsigned int payload = 0u) { emit(site, kBegin, payload, 0u); }
  __device__ __forceinline__ void end(unsigned int site, unsigned int payload = 0u) { emit(site, kEnd, payload, 0u); }
  __device__ __forceinline__ void instant(unsigned int site, unsigned int payload = 0u) { emit(site, kInstant, payload, 0u); }
  __device__ __forceinline__ void counter(unsigned int site, unsigned int value) { emit(site, kCounter, value, 0u); }

  // flags: three user bits (tag bits 28-30).
  __device__ __forceinline__ void emit(unsigned int site, unsigned int kind, unsigned int payload, unsigned int flags) {
    const unsigned long long t = globaltimer();
    const uint4 r = make_uint4(static_cast<unsigned int>(t), static_cast<unsigned int>(t >> 32), payload,
                               tag_ | ((flags & 7u) << 28) | ((kind & 3u) << 16) | (site & 0xFFFFu));
    if (left_ != 0u) {
      *next_ = r;  // one 16-byte store: timestamp, payload and committed tag together
      ++next_;
      --left_;
    } else if (live_) {
      overflow();
    }
  }

 private:
  // Inline on purpose: an out-of-line member call takes `this`, which moves the whole
  // Recorder to local memory and turns every event into local loads and stores.
  __device__ __forceinline__ void overflow() {
    atomicOr(status_, static_cast<unsigned int>(kOverflow));
    live_ = false;
  }

  uint4* next_;
  unsigned int left_;
  unsigned int tag_;
  unsigned int* status_;
  bool live_;
};

#else  // probe compiled out: same interface, no code, no memory traffic

class Recorder {
 public:
  __device__ __forceinline__ Recorder(void*, unsigned int, bool) {}
  __device__ __forceinline__ void begin(unsigned int, unsigned int = 0u) {}
  __device__ __forceinline__ void end(unsigned int, unsigned int = 0u) {}
  __device__ __forceinline__ void instant(unsigned int, unsigned int = 0u) {}
  __device__ __forceinline__ void counter(unsigned int, unsigned int) {}
  __device__ __forceinline__ void emit(unsigned int, unsigned int, unsigned int, unsigned int) {}
};

#endif  // ATREX_TIMELINE_ENABLED

}  // namespace timeline
}  // namespace atrex
