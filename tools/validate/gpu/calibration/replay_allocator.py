"""A replay of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, default configuration, one stream)
over the event streams allocator_events.py records, to check its rules against a real step's segments before zeromem
models reserved memory from them. The same rules as include/zeromem/core/caching_allocator.hpp (which serves requests
without frees), with frees: a freed block merges with free neighbours of its segment and returns to its pool.

Per case: the replay starts from the segments recorded at the start (their free blocks cached, their live blocks
held), serves every allocation and free of the trace in order, and reports where its segment allocations first differ
from the trace's, its highest reserved bytes against max_memory_reserved(), and its allocated bytes at each mark.

usage: python3 replay_allocator.py allocator_events.json.gz [--own-addresses]   (the cases recorded on a GPU)
       python3 replay_allocator.py --check allocator_events.json.gz   (exit 1 unless every case is reproduced exactly)
       python3 replay_allocator.py --self-test                   (the rules on streams written out by hand; no GPU)"""
import bisect
import gzip
import json
import sys

MIN_BLOCK = 512            # kMinBlockSize
SMALL_SIZE = 1 << 20       # kSmallSize
SMALL_BUFFER = 2 << 20     # kSmallBuffer
LARGE_BUFFER = 20 << 20    # kLargeBuffer
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20      # kRoundLarge


def round_size(n):
    return MIN_BLOCK if n < MIN_BLOCK else (n + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


def segment_size(rounded):
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return (rounded + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


class Block:
    __slots__ = ("addr", "size", "free", "prev", "next", "small")

    def __init__(self, addr, size, small, free):
        self.addr, self.size, self.small, self.free, self.prev, self.next = addr, size, small, free, None, None

    def key(self):
        return (self.size, self.addr)


class Allocator:
    """The blocks of both pools; free ones sorted by (size, address), as get_free_block's BlockComparator orders them."""

    def __init__(self):
        self.free = {True: [], False: []}
        self.free_blocks = {True: {}, False: {}}
        self.allocated = self.reserved = self.peak_allocated = self.peak_reserved = 0
        self.segment_allocs = 0
        self.next_addr = 1 << 40  # the replay's own addresses for segments it makes

    def _cache(self, b):
        bisect.insort(self.free[b.small], b.key())
        self.free_blocks[b.small][b.key()] = b

    def _uncache(self, b):
        p = self.free[b.small]
        p.pop(bisect.bisect_left(p, b.key()))
        del self.free_blocks[b.small][b.key()]

    def add_segment(self, addr, blocks, small):
        """A recorded segment: [(size, free)] in address order."""
        prev = None
        for size, free in blocks:
            b = Block(addr, size, small, free)
            b.prev = prev
            if prev:
                prev.next = b
            prev = b
            addr += size
            if free:
                self._cache(b)
            else:
                self.allocated += size
            self.reserved += size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return prev

    def malloc(self, n):
        """Serves a request as malloc does; returns its block."""
        size = round_size(n)
        small = size <= SMALL_SIZE
        pool = self.free[small]
        i = bisect.bisect_left(pool, (size, -1))
        if i < len(pool):
            b = self.free_blocks[small][pool[i]]
            self._uncache(b)
        else:
            seg = segment_size(size)
            b = Block(self.next_addr, seg, small, True)
            self.next_addr += seg + (1 << 30)
            self.reserved += seg
            self.segment_allocs += 1
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        remaining = b.size - size
        if (remaining >= MIN_BLOCK) if small else (remaining > SMALL_SIZE):  # should_split
            r = Block(b.addr + size, remaining, small, True)
            r.prev, r.next = b, b.next
            if b.next:
                b.next.prev = r
            b.next = r
            b.size = size
            self._cache(r)
        b.free = False
        self.allocated += b.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return b

    def release(self, b):
        """free_block: merged with its free neighbours (try_merge_blocks), back in its pool."""
        self.allocated -= b.size
        b.free = True
        for n in (b.prev, b.next):
            if n is not None and n.free:
                self._uncache(n)
                if n is b.prev:
                    n.size += b.size
                    n.next = b.next
                    if b.next:
                        b.next.prev = n
                    b = n
                else:
                    b.size += n.size
                    b.next = n.next
                    if n.next:
                        n.next.prev = b
        self._cache(b)

    def release_segment(self, size):
        """A whole free segment of `size` bytes given back (release_cached_blocks); False if none is cached."""
        for small in (True, False):
            b = self.free_blocks[small].get(next((k for k in self.free[small] if k[0] == size), None))
            if b is not None and b.prev is None and b.next is None:
                self._uncache(b)
                self.reserved -= size
                return True
        return False


def replay(case, own_addresses=False):
    """Replays one recorded case; returns what it found. A segment the replay makes where the trace made one takes the
    trace's address (the driver's choice, which no rule here predicts), so that free blocks of equal size are ordered as
    the allocator ordered them (BlockComparator: size, then address); own_addresses=True gives segments the replay's own
    increasing addresses instead, as a prediction without a trace would have to."""
    a = Allocator()
    for addr, total, _stream, expandable, blocks in case.get("initial_segments", []):
        if expandable:
            raise SystemExit("expandable segments are not replayed here; record the case without PYTORCH_CUDA_ALLOC_CONF")
        a.add_segment(addr, [(size, state == "i") for size, state in blocks], total <= SMALL_BUFFER)  # kSmallBuffer segments
    live, out = {}, {"first_difference": None, "trace_segment_allocs": 0, "other_blocks": 0, "allocated_at_marks": [],
                     "reserved_at_marks": []}
    marks = case.get("marks", [])

    def at_marks(i):
        for m in marks:
            if m == i:
                out["allocated_at_marks"].append(a.allocated)
                out["reserved_at_marks"].append(a.reserved)

    at_marks(0)
    trace_segment = None
    for i, (action, addr, size, _stream) in enumerate(case["events"]):
        if action == "S":
            out["trace_segment_allocs"] += 1
            trace_segment = addr
        elif action == "a":
            before, own = a.segment_allocs, a.next_addr
            if trace_segment is not None and not own_addresses:
                a.next_addr = trace_segment
            b = a.malloc(size)
            if not own_addresses:
                a.next_addr = own
            made = a.segment_allocs > before
            live[addr] = b
            if made != (trace_segment is not None) and out["first_difference"] is None:
                out["first_difference"] = {"event": i, "size": size, "trace_made_segment": trace_segment is not None,
                                           "replay_made_segment": made}
            if not own_addresses and b.addr != addr:
                out["other_blocks"] += 1  # the allocator handed out another block than this replay chose
            trace_segment = None
        elif action == "f":
            if addr in live:
                a.release(live.pop(addr))
        elif action == "F":
            a.release_segment(size)
        at_marks(i + 1)
    out.update(replay_segment_allocs=a.segment_allocs, replay_peak_reserved=a.peak_reserved, replay_peak_allocated=a.peak_allocated,
               measured_max_reserved=case.get("max_reserved"), measured_max_allocated=case.get("max_allocated"))
    return out


def exact(r):
    """Every block where the allocator put it, and both peaks to the byte."""
    return (r["first_difference"] is None and r["other_blocks"] == 0 and r["replay_peak_reserved"] == r["measured_max_reserved"]
            and r["replay_peak_allocated"] == r["measured_max_allocated"])


def self_test():
    """The rules on streams whose outcome is written out from the allocator's constants."""
    MiB = 1 << 20
    a = Allocator()
    x = a.malloc(85 * MiB)  # an 86 MiB segment, 1 MiB left: not more than kSmallSize, kept whole
    assert (x.size, a.reserved) == (86 * MiB, 86 * MiB), (x.size, a.reserved)
    y = a.malloc(3 * MiB)  # a 20 MiB segment, split: 17 MiB cached
    assert (y.size, a.reserved) == (3 * MiB, 106 * MiB)
    z = a.malloc(17 * MiB)  # the cached 17 MiB block, exactly
    assert (z.size, a.reserved, a.segment_allocs) == (17 * MiB, 106 * MiB, 2)
    a.release(y)
    a.release(z)  # merges with y's block: one free 20 MiB block again
    assert a.free[False] == [(20 * MiB, y.addr)], a.free[False]
    w = a.malloc(19 * MiB + MiB // 2)  # best fit: the 20 MiB block, 0.5 MiB left, kept whole
    assert (w.size, a.reserved) == (20 * MiB, 106 * MiB)
    a.release(x)
    v = a.malloc(40 * MiB)  # the free 86 MiB block: 46 MiB left, split
    assert (v.size, a.reserved, a.segment_allocs) == (40 * MiB, 106 * MiB, 2)
    s = a.malloc(1000)  # the small pool: a 2 MiB segment, split to 1024 B
    assert (s.size, a.reserved) == (1024, 108 * MiB)
    assert a.peak_allocated == 106 * MiB  # x (86 MiB, whole), y and z together
    # A recorded stream: one segment made, one served from the cache.
    case = {"events": [["S", 0, 20 * MiB, 0], ["a", 7, 3 * MiB, 0], ["a", 8, 4 * MiB, 0], ["f", 7, 3 * MiB, 0]], "marks": [2, 4],
            "max_reserved": 20 * MiB}
    r = replay(case)
    assert r["first_difference"] is None and r["replay_segment_allocs"] == 1 and r["replay_peak_reserved"] == 20 * MiB, r
    assert r["allocated_at_marks"] == [3 * MiB, 4 * MiB], r
    # A trace that made a segment where the replay finds a cached block is reported at that event.
    case["events"].insert(3, ["S", 0, 20 * MiB, 0])
    case["events"].insert(4, ["a", 9, 2 * MiB, 0])
    r = replay(case)
    assert r["first_difference"] == {"event": 4, "size": 2 * MiB, "trace_made_segment": True, "replay_made_segment": False}, r
    print("replay_allocator self-test: every check passed")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        self_test()
        return 0
    check = "--check" in sys.argv
    own = "--own-addresses" in sys.argv
    paths = [p for p in sys.argv[1:] if not p.startswith("--")]
    if len(paths) != 1 or (check and own):
        print(__doc__, file=sys.stderr)
        return 2
    with (gzip.open(paths[0], "rt") if paths[0].endswith(".gz") else open(paths[0])) as f:
        data = json.load(f)
    replayed = failed = 0
    for case in data["cases"]:
        if "events" not in case:
            print(case["name"], "no events:", case.get("error", ""))
            continue
        r = replay(case, own_addresses=own)
        replayed += 1
        if check and not exact(r):
            failed += 1
            print("NOT REPRODUCED", end=" ")
        print(case["name"], json.dumps(r))
    if check:
        print("%d of %d recorded steps reproduced exactly" % (replayed - failed, replayed))
        return 1 if failed or not replayed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
