"""The push recovery figure's silences (bench/push.py `silences`): how long each kill of the worker stopped
new deliveries, read from the receiver's arrival times in the same run."""

import pytest

from bench.push import silences


def test_each_kill_reports_the_longest_wait_for_a_new_delivery_before_the_next_kill():
    arrivals = [0.1, 0.2, 0.3, 0.95, 1.0, 1.1, 2.0, 2.6, 2.7]
    # The first kill's: 0.3 to 0.95, not 1.1 to 2.0 (0.9), which follows the next kill.
    # The second's: 1.1 to 2.0.
    assert silences(arrivals, [0.3, 1.1]) == pytest.approx([0.65, 0.9])


def test_a_delivery_landing_just_after_the_kill_does_not_hide_the_silence_that_follows():
    # The one sent before the kill arrives 1 ms after it; the worker's start again takes 0.6 s.
    arrivals = [0.9, 1.001, 1.601, 1.7]
    assert silences(arrivals, [1.0]) == pytest.approx([0.6])


def test_a_kill_after_the_last_arrival_reports_no_silence():
    assert silences([0.1, 0.2], [0.5]) == [0.0]
