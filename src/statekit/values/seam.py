"""The one seam through which tests see which way the fast paths went, and set the knobs they vary."""

from __future__ import annotations


class Seam:
    """Counters of the paths taken in this process, and the knobs of the fast paths.

    Tests read a counter before and after what they do (other tests run in the
    same process), and set a knob with ``monkeypatch.setattr(SEAM, ...)``.
    Nothing else writes the knobs.

    Attributes:
        typed_loads: Loads the typed session path committed.
        typed_decodes: Documents the typed session path decoded (or tried to).
        depth_passes: Depth passes over what the typed path decoded (the bounded decoder's types did not prove the limit).
        rechecks: Live dumps run again checking value by value, because their census found something.
        bounded_from: Documents from this size up try the bounded decoder first
            (:mod:`statekit.values.bounded`). Below it the depth pass costs less
            than a tenth of a millisecond, and the decoder (made at the first
            such document) several; above it the bounded decode saves more than
            the pass costs (15% of a 1,000-message load by a new object, 480 KB).
        pointer_prefixes: An append-only list's saved items are compared with the
            live list by their pointers where CPython's list layout allows it
            (``False``: by the identity scan that runs elsewhere; see ``session/_prefix.py``).
        deferring: A live dump's checks of the values under ``Any`` are deferred to one
            census (``False``: every value is checked at once, as the census's rerun does).
    """

    __slots__ = ("bounded_from", "deferring", "depth_passes", "pointer_prefixes", "rechecks", "typed_decodes", "typed_loads")

    def __init__(self) -> None:
        self.typed_loads = self.typed_decodes = self.depth_passes = self.rechecks = 0
        self.bounded_from = 1 << 18
        self.deferring = True
        self.pointer_prefixes = True


SEAM = Seam()
"""The process's seam."""

__all__ = ["SEAM", "Seam"]
