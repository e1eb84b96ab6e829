// deferred.cuh - candidate timeline probe (deferred store: each event stores the previous record); ATREXLT1 buffer ABI 1.0.
//
// Screened by benchmarks/timeline_overhead_sweep.py against the shipped probe
// (backends/cuda_backend/atrex_timeline.cuh), whose constructor, claim, status bits and
// compiled-out form it shares; only the event path and the destructor differ.
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
      : slot_(nullptr), end_(nullptr), header_(nullptr), pending_(make_uint4(0u, 0u, 0u, 0u)), step_(0ull), tag_(0u), dropped_(0u) {
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
    slot_ = reinterpret_cast<uint4*>(base + 64ull) + static_cast<unsigned long long>(owner) * per_owner;
    end_ = slot_ + per_owner;
    header_ = h;
    tag_ = 0x80000000u | (sm << 18);
  }

  // Flushes the last event's record, then publishes a dropped event as the sticky overflow bit
  // (once per owner, off the event path). Runs at kernel exit and on any `return` out of scope.
  __device__ __forceinline__ ~Recorder() {
    if (header_ == nullptr) return;
    if (step_ != 0ull) {
      if (slot_ < end_) *slot_ = pending_;
      else dropped_ = 1u;
    }
    if (dropped_ != 0u) atomicOr(&header_->status, static_cast<unsigned int>(kOverflow));
  }

  // Two recorders for one owner would write the same slots: copies are refused at compile time.
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  __device__ __forceinline__ void begin(unsigned int site, unsigned int payload = 0u) { emit(site, kBegin, payload, 0u); }
  __device__ __forceinline__ void end(unsigned int site, unsigned int payload = 0u) { emit(site, kEnd, payload, 0u); }
  __device__ __forceinline__ void instant(unsigned int site, unsigned int payload = 0u) { emit(site, kInstant, payload, 0u); }
  __device__ __forceinline__ void counter(unsigned int site, unsigned int value) { emit(site, kCounter, value, 0u); }

  // flags: three user bits (tag bits 28-30).
  // Deferred store: an event stores the previous event's record (held in registers) and then
  // takes its own timestamp, so no store waits on a fresh timer value. Before the first event
  // the held record is all zeros and the step is 0: the first event rewrites the zeroed first
  // slot in place and the pointer stays. `slot < end` (false in non-writer threads, where both
  // are null, and once the range is full) guards the store and the step; its complement marks
  // a drop (with an empty range the first event's spurious drop is followed by a real one).
  __device__ __forceinline__ void emit(unsigned int site, unsigned int kind, unsigned int payload, unsigned int flags) {
    const unsigned int tag = tag_ | ((flags & 7u) << 28) | ((kind & 3u) << 16) | (site & 0xFFFFu);
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        ".reg .b64 t;\n\t"
        "setp.lt.u64 p, %0, %7;\n\t"
        "@p st.global.v4.u32 [%0], {%3, %4, %5, %6};\n\t"
        "@p add.u64 %0, %0, %2;\n\t"
        "@!p mov.u32 %1, 1;\n\t"
        "mov.u64 %2, 16;\n\t"
        "mov.u64 t, %%globaltimer;\n\t"
        "mov.b64 {%3, %4}, t;\n\t"
        "}"
        : "+l"(slot_), "+r"(dropped_), "+l"(step_), "+r"(pending_.x), "+r"(pending_.y), "+r"(pending_.z),
          "+r"(pending_.w)
        : "l"(end_));
    pending_.z = payload;
    pending_.w = tag;
  }

 private:
  uint4* slot_;               // where the held record goes; null in threads that do not record
  uint4* end_;                // one past the owner's last record; null in threads that do not record
  Header* header_;            // set only once the owner is claimed: the destructor's target
  uint4 pending_;             // the last event's record, not yet stored
  unsigned long long step_;   // 0 until the first event, then 16 (bytes per record)
  unsigned int tag_;          // committed bit | SM << 18
  unsigned int dropped_;      // 1 once an event found the range full
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
