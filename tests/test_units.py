import pytest

from synth.units import bandwidth_gbps, format_size, parse_size, parse_sizes, size_range, transfer_time_us


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", 8),
        ("8B", 8),
        ("1K", 1024),
        ("1KiB", 1024),
        ("1KB", 1000),
        ("4M", 4 << 20),
        ("1GiB", 1 << 30),
        ("1g", 1 << 30),
        ("1.5K", 1536),
        (64, 64),
    ],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1X", "-5", "0.5B"])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_lists_and_ranges():
    assert parse_sizes("1KiB,1MiB,1GiB") == [1024, 1 << 20, 1 << 30]
    assert parse_sizes("8..64") == [8, 16, 32, 64]
    assert size_range(8, 1 << 30, 2)[-1] == 1 << 30 and len(size_range(8, 1 << 30, 2)) == 28
    assert size_range(8, 40, step=8) == [8, 16, 24, 32, 40]
    assert format_size(1 << 20) == "1MiB" and format_size(1000) == "1000B"


def test_unit_conversions():
    assert transfer_time_us(1e9, 1.0) == pytest.approx(1e6)  # 1 GB at 1 GB/s = 1 s
    assert bandwidth_gbps(25e3, 1.0) == pytest.approx(25.0)
