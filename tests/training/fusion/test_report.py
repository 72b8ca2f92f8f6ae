"""The fusion's ship decision (engine.training.fusion.report): a paired win beyond chance."""
from __future__ import annotations

import numpy as np

from engine.training.fusion.report import decide, sign_test


def test_ship_decision_needs_a_paired_win_beyond_chance():
    def row(router, memory, hits):
        return {"router": router, "memory": memory, "heading+generated": float(np.mean(hits)),
                "hits": hits}

    base = [1] * 60 + [0] * 40
    better = [1] * 60 + [1] * 12 + [0] * 28  # 12 more queries reached, none lost
    win = [row("z-sum (untrained)", True, base), row("learned", True, better),
           row("z-sum (untrained)", False, base), row("learned", False, better)]
    assert decide(win)[0]
    lose_without = win[:2] + [row("z-sum (untrained)", False, better),
                              row("learned", False, base)]
    assert not decide(lose_without)[0]
    one_more = [1] * 61 + [0] * 39  # a single query's difference: chance
    assert not decide([row("z-sum (untrained)", False, base),
                       row("learned", False, one_more)])[0]
    assert not decide([row("z-sum (untrained)", False, base), row("learned", False, base)])[0]
    assert sign_test(5, 0) == 1 / 32 and sign_test(0, 0) == 1.0
