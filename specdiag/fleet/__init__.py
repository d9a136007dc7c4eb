"""``specdiag fleet``: many deployments analysed with the same engine, then compared.

discover (pod folders under each root) → execute (process pool or Ray; one task per deployment group,
a failed task retried once, then kept as a row with its error) → rows (versions, TP, config differences
from the fleet's majority, findings by rule) → contrast (which attribute separates affected deployments
from the others, stated with counts).
"""
