import pytest

from replicator.core.units import format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0.0), ("250ms", 0.25), ("5m", 300.0), ("1h", 3600.0), ("7d", 604800.0), ("1.5s", 1.5)],
)
def test_parse_duration_accepts_each_unit(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5", "5 minutes", "m", "", "1w", "5mm"])
def test_parse_duration_rejects_missing_or_unknown_units(text):
    with pytest.raises(ValueError, match="unparseable duration"):
        parse_duration(text)


def test_parse_duration_rejects_negative():
    with pytest.raises(ValueError, match="negative duration"):
        parse_duration("-5s")


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1B", 1),
        ("64KiB", 65536),
        ("100MiB", 104857600),
        ("4GiB", 4 * 1024**3),
        ("1KB", 1000),
        ("1.5KiB", 1536),
        (4096, 4096),
    ],
)
def test_parse_size_accepts_binary_and_decimal_units_and_plain_bytes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["-1MiB", -1])
def test_parse_size_rejects_negative(text):
    with pytest.raises(ValueError, match="negative size"):
        parse_size(text)


@pytest.mark.parametrize("text", ["10", "10 mib", "MiB", "1XB"])
def test_parse_size_rejects_unparseable(text):
    with pytest.raises(ValueError, match="unparseable size"):
        parse_size(text)


def test_format_size_is_human_readable():
    assert format_size(512) == "512B"
    assert format_size(1536) == "1.5KiB"
    assert format_size(3 * 1024**3) == "3.0GiB"
