// atrex_timeline.cuh - intra-kernel timeline probe, ATREXLT1 buffer ABI 1.0.
//
// Buffer: 64-byte header | capacity x 16-byte records | owner_count x 8-byte claim words.
// One Recorder per owner (a writer thread of a CTA) per launch. The constructor reads the
// header in one round trip and claims the owner's slot range once with compare-and-swap.
// Each event afterwards is branch-free: a warp-wide %globaltimer read (one CS2R) and the
// record as two plain 8-byte stores predicated on `seq < records_per_owner`, so only the
// writer lane touches memory and the warp never diverges. No atomics, fences or shared
// memory on the event path.
// A full range stops recording (never wraps into another owner's range): the sequence keeps
// counting past the end and the destructor sets the sticky overflow bit once if it did.
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
      : records_(nullptr), header_(nullptr), seq_(0u), end_(0u), tag_(0u) {
    if (!is_writer || buffer == nullptr) return;
    Header* h = static_cast<Header*>(buffer);
    // Four independent 16-byte loads and one combined verdict: a single memory round trip
    // (checking field by field with || serializes a dozen dependent loads per writer).
    const uint4* words = static_cast<const uint4*>(buffer);
    const uint4 w0 = words[0], w1 = words[1], w2 = words[2], w3 = words[3];
    const unsigned int capacity = w1.x, owners = w1.y, per_owner = w1.z;
    const bool header_ok =
        (w0.x == 0x45525441u) & (w0.y == 0x31544C58u) & ((w0.z & 0xFFFFu) == 1u) &
        (w0.w == ((16u << 16) | 64u)) &
        (static_cast<unsigned long long>(owners) * per_owner == capacity) &
        (w2.x == gridDim.x) & (w2.y == gridDim.y) & (w2.z == gridDim.z) &
        (w2.w == blockDim.x) & (w3.x == blockDim.y) & (w3.y == blockDim.z);
    if (!header_ok) {
      atomicOr(&h->status, static_cast<unsigned int>(kBadHeader));
      return;
    }
    const unsigned int ctas = gridDim.x * gridDim.y * gridDim.z;
    const unsigned int writers = owners / ctas;
    if (writers == 0u || writers * ctas != owners || writer_ordinal >= writers) {
      atomicOr(&h->status, static_cast<unsigned int>(kBadOwner));
      return;
    }
    const unsigned int cta = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    const unsigned int owner = cta * writers + writer_ordinal;
    unsigned char* base = static_cast<unsigned char*>(buffer);
    unsigned long long* claims = reinterpret_cast<unsigned long long*>(base + 64ull + 16ull * capacity);
    const unsigned long long claim =
        (static_cast<unsigned long long>(cta + 1u) << 32) | static_cast<unsigned long long>(thread + 1u);
    if (atomicCAS(claims + owner, 0ull, claim) != 0ull) {
      atomicOr(&h->status, static_cast<unsigned int>(kDuplicateOwner));
      return;
    }
    const unsigned int sm = smid();
    if (sm > 0x3FFu) {
      atomicOr(&h->status, static_cast<unsigned int>(kBadSm));
      return;
    }
    records_ = reinterpret_cast<uint4*>(base + 64ull) + static_cast<unsigned long long>(owner) * per_owner;
    header_ = h;
    end_ = per_owner;
    tag_ = 0x80000000u | (sm << 18);
  }

  // Publishes dropped events as the sticky overflow bit (once per owner, off the event path).
  __device__ __forceinline__ ~Recorder() {
    if (header_ != nullptr && seq_ > end_) atomicOr(&header_->status, static_cast<unsigned int>(kOverflow));
  }

  // Two recorders for one owner would write the same slots: copies are refused at compile time.
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  __device__ __forceinline__ void begin(unsigned int site, unsigned int payload = 0u) { emit(site, kBegin, payload, 0u); }
  __device__ __forceinline__ void end(unsigned int site, unsigned int payload = 0u) { emit(site, kEnd, payload, 0u); }
  __device__ __forceinline__ void instant(unsigned int site, unsigned int payload = 0u) { emit(site, kInstant, payload, 0u); }
  __device__ __forceinline__ void counter(unsigned int site, unsigned int value) { emit(site, kCounter, value, 0u); }

  // flags: three user bits (tag bits 28-30).
  // Only the timer read is volatile asm (it must stay where the call is). The stores are plain
  // C++ so the compiler schedules them like the kernel's own stores, and the sequence steps
  // unconditionally (no per-event drop flag): on the H200 sweep kernel this costs about a
  // third less than one predicated asm block with a 16-byte store and a drop register,
  // because it disturbs the surrounding loop's code less (benchmarks/timeline_overhead_sweep.py).
  // A record cut in half (a kernel killed between its two stores, in either order) has no
  // committed bit or a zero timestamp, and the decoder rejects both.
  __device__ __forceinline__ void emit(unsigned int site, unsigned int kind, unsigned int payload, unsigned int flags) {
    const unsigned int tag = tag_ | ((flags & 7u) << 28) | ((kind & 3u) << 16) | (site & 0xFFFFu);
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (seq_ < end_) {
      unsigned long long* const slot = reinterpret_cast<unsigned long long*>(records_ + seq_);
      slot[0] = now;
      slot[1] = (static_cast<unsigned long long>(tag) << 32) | payload;
    }
    ++seq_;  // 2^32 events per owner and launch would wrap it: far beyond any capture's range
  }

 private:
  uint4* records_;       // this owner's first record
  Header* header_;       // set only once the owner is claimed: the destructor's overflow target
  unsigned int seq_;     // events emitted so far; past end_ once the range is full
  unsigned int end_;     // records_per_owner; 0 in threads that do not record
  unsigned int tag_;     // committed bit | SM << 18
};

#else  // probe compiled out: same interface, no code, no memory traffic

class Recorder {
 public:
  __device__ __forceinline__ Recorder(void*, unsigned int, bool) {}
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  __device__ __forceinline__ void begin(unsigned int, unsigned int = 0u) {}
  __device__ __forceinline__ void end(unsigned int, unsigned int = 0u) {}
  __device__ __forceinline__ void instant(unsigned int, unsigned int = 0u) {}
  __device__ __forceinline__ void counter(unsigned int, unsigned int) {}
  __device__ __forceinline__ void emit(unsigned int, unsigned int, unsigned int, unsigned int) {}
};

#endif  // ATREX_TIMELINE_ENABLED

}  // namespace timeline
}  // namespace atrex
