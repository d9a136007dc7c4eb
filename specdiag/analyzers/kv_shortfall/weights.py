"""KV001's evidence weights, defined once: the factor each kind of evidence multiplies (``support``) or
divides (``oppose``, ``absent``) a cause's weight by, and the priors a cause starts from.

The tiers say how much a line proves, so a reader compares two pieces of evidence by name rather than by
number, and a new rule of this family picks a tier instead of inventing a factor:

* ``DECISIVE`` (40): a line of this very request names the mechanism outright (the P2P path's empty
  mask, the async lookup's shorter answer); it outweighs every prior.
* ``CONCLUSIVE`` (30): a line of the failing rank just before names the mechanism (a negative pin count, no
  CPU staging buffer), or the loss's shape rules a mechanism out (whole chunks against an unfull chunk).
* ``STRONG`` (10): direct evidence that still leaves room (the request's own lookup warned that ranks
  disagree; the lookup-to-retrieve gap far below the configured pin timeout).
* ``MODERATE`` (5): a line or number that points at one cause among few.
* ``WEAK`` (3): circumstantial, or true of several causes.
* ``SLIGHT`` (2): context that tilts, such as a line elsewhere in the log or a missing line.
* ``HINT`` (1.5): barely more than context.
* ``RECORD_ONLY`` (1): the reason is listed for the reader; the weight does not change.

Factors between the tiers are named after the tier below which they sit and their value (``STRONG_25`` is
between ``STRONG`` and ``CONCLUSIVE``), so every number keeps its exact value and its place on the scale.
"""

from __future__ import annotations

DECISIVE = 40
CONCLUSIVE = 30
STRONG = 10
MODERATE = 5
WEAK = 3
SLIGHT = 2
HINT = 1.5
RECORD_ONLY = 1

#: between STRONG and CONCLUSIVE: a line names the mechanism but is tied to the request by rank and time
STRONG_25 = 25
STRONG_20 = 20
STRONG_15 = 15
STRONG_12 = 12
#: between MODERATE and STRONG
MODERATE_8 = 8
MODERATE_6 = 6
#: between WEAK and MODERATE
WEAK_4 = 4
#: between SLIGHT and WEAK
SLIGHT_2_5 = 2.5
#: between RECORD_ONLY and HINT
HINT_1_3 = 1.3

# ---- priors: how often a cause explains a shortfall in practice, before any evidence ----------------
#: the most common cause
PRIOR_USUAL = 1.0
#: common causes, about half as often
PRIOR_COMMON = 0.45
PRIOR_COMMON_0_4 = 0.4
#: occasional causes
PRIOR_OCCASIONAL = 0.3
PRIOR_OCCASIONAL_0_2 = 0.2
#: uncommon causes (a feature or a version must be in play)
PRIOR_UNCOMMON = 0.1
PRIOR_UNCOMMON_0_15 = 0.15
#: rare causes (an old bug, a narrow setup)
PRIOR_RARE = 0.05
PRIOR_RARE_0_06 = 0.06
#: the user's usual hunch that cannot explain a shortfall: kept on the board to be argued against
PRIOR_HUNCH = 0.02
