"""bench/allocator/expandable_model.py, the host-side model of PyTorch's expandable_segments: its pages, its
splitting and merging rules, growth into a free block's unmapped tail, and its errors, on small traces."""

import gzip
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "allocator"))
import expandable_model as em  # noqa: E402

MIB = 1 << 20


def replay_lines(lines, gz=False):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.trace.gz" if gz else "t.trace")
        with (gzip.open if gz else open)(path, "wt") as f:
            f.write("# test trace\n" + "\n".join(lines) + "\n")
        return em.replay(path)


class PagesTest(unittest.TestCase):
    def test_a_small_request_maps_one_2_mib_page_and_a_large_one_20_mib_pages(self):
        m = replay_lines(["a 1 100 0"])
        self.assertEqual((m.peak, m.peak_split[True], m.peak_split[False]), (2 * MIB, 2 * MIB, 0))
        m = replay_lines(["a 1 %d 0" % (30 * MIB)], gz=True)
        self.assertEqual((m.peak, m.peak_split[False]), (40 * MIB, 40 * MIB))

    def test_the_mapped_rest_of_a_page_serves_the_next_request(self):
        m = replay_lines(["a 1 %d 0" % (30 * MIB), "a 2 %d 0" % (5 * MIB)])
        self.assertEqual(m.peak, 40 * MIB)
        self.assertEqual(m.live["2"].address, m.live["1"].address + 30 * MIB)  # split: the request at the front

    def test_a_large_rest_of_1_mib_or_less_is_not_split_off(self):
        m = replay_lines(["a 1 %d 0" % (19 * MIB + MIB // 2), "a 2 %d 0" % (2 * MIB)])
        self.assertEqual(m.live["1"].size, 20 * MIB)  # the 0.5 MiB rest stays with the block
        self.assertEqual(m.peak, 40 * MIB)

    def test_sizes_round_up_to_512_bytes(self):
        m = replay_lines(["a 1 1 0", "a 2 513 0"])
        self.assertEqual((m.live["1"].size, m.live["2"].size), (512, 1024))


class DriverCallsTest(unittest.TestCase):
    def test_a_growth_is_one_range_of_its_pages_and_a_hit_in_a_mapped_rest_none(self):
        # 30 MiB: two 20 MiB pages in one range; 5 MiB then fits the mapped rest; 20 MiB more maps one range of
        # two pages (5 MiB of the rest, then 15 MiB of new pages: one page); a small request its own range.
        m = replay_lines(["a 1 %d 0" % (30 * MIB), "a 2 %d 0" % (5 * MIB), "a 3 %d 0" % (20 * MIB), "a 4 100 0"])
        self.assertEqual((m.pages_mapped, m.map_calls), (2 + 1 + 1, 3))


class ReuseTest(unittest.TestCase):
    def test_freed_neighbours_merge_and_serve_a_request_of_both(self):
        m = replay_lines(["a 1 %d 0" % (10 * MIB), "a 2 %d 0" % (10 * MIB), "f 1 0 0", "f 2 0 0",
                          "a 3 %d 0" % (20 * MIB)])
        self.assertEqual(m.peak, 20 * MIB)

    def test_a_free_block_grows_into_its_unmapped_tail(self):
        # 15 MiB in one 20 MiB page, freed: a 30 MiB request maps one more page after it, not two elsewhere.
        m = replay_lines(["a 1 %d 0" % (15 * MIB), "f 1 0 0", "a 2 %d 0" % (30 * MIB)])
        self.assertEqual(m.peak, 40 * MIB)

    def test_streams_do_not_share_blocks(self):
        m = replay_lines(["a 1 %d 0" % (10 * MIB), "f 1 0 0", "a 2 %d 7" % (10 * MIB)])
        self.assertEqual(m.peak, 40 * MIB)  # stream 7 gets its own segment and page

    def test_pages_are_never_unmapped(self):
        m = replay_lines(["a 1 %d 0" % (100 * MIB), "f 1 0 0"])
        self.assertEqual((m.peak, m.mapped[False]), (100 * MIB, 100 * MIB))


class ErrorsTest(unittest.TestCase):
    def test_a_free_of_an_unknown_address_names_the_line(self):
        with self.assertRaisesRegex(ValueError, r"t\.trace:3: free of 9, which is not allocated"):
            replay_lines(["a 1 100 0", "f 9 100 0"])

    def test_a_short_line_says_what_is_expected(self):
        with self.assertRaisesRegex(ValueError, r"expected 'a\|f ADDRESS BYTES \[STREAM\]'"):
            replay_lines(["a 1"])

    def test_pytorch_only_lines_are_skipped(self):
        m = replay_lines(["S 1 %d 0" % (20 * MIB), "a 1 100 0", "r 1 100 0", "f 1 100 0"])
        self.assertEqual(m.peak, 2 * MIB)


class RealTraceTest(unittest.TestCase):
    def test_alternating_reserves_what_expandable_segments_reserved_on_the_h200(self):
        path = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "traces", "alternating.trace.gz")
        m = em.replay(path)
        self.assertEqual(m.peak, 16_059_990_016)  # the H200's torch.cuda.max_memory_reserved(), to the byte
        self.assertEqual((m.peak_split[True], m.peak_split[False]), (56 * MIB, 15_260 * MIB))


if __name__ == "__main__":
    unittest.main()
