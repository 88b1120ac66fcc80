"""A checksum on every marshal file bxmem writes, checked before marshal reads it: marshal trusts the sizes
it reads, so a damaged byte can have it allocate a billion elements, for hours, past every signal. A residue
modulo a prime below 2**30 (one CPython digit); random damage passes it about once in a billion.
"""

from __future__ import annotations

import marshal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the idle path
if TYPE_CHECKING:
    from typing import Any

_PRIME = 1_073_741_789  # the largest prime below 2**30
_SEAL_BYTES = 4


def _residue(data: bytes) -> int:
    return (int.from_bytes(data, "little") + len(data)) % _PRIME


def seal(data: bytes) -> bytes:
    return data + _residue(data).to_bytes(_SEAL_BYTES, "little")


def unseal(sealed: bytes) -> bytes:
    """The data, or ValueError when the seal is missing or does not match."""
    data, stamp = sealed[:-_SEAL_BYTES], sealed[-_SEAL_BYTES:]
    if len(sealed) < _SEAL_BYTES or int.from_bytes(stamp, "little") != _residue(data):
        raise ValueError("damaged: its checksum does not match")
    return data


def unmarshal(sealed: bytes) -> Any:
    """The value a sealed marshal file holds: the one reader of them. ValueError
    saying why not: damaged (the seal), or not marshal data this bxmem can read."""
    data = unseal(sealed)
    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError):  # cut short; marshal's own depth limit; a code it does not know
        raise ValueError("not marshal data this bxmem can read") from None
