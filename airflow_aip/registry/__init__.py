"""The Model Registry's rules, pure: what a version is uploaded as, and how a champion moves.

:mod:`.upload` turns an export's manifest into one ``models.upload`` request whose labels find
it again (exactly once); :mod:`.gate` is the champion gate, the one rule both champion stores
apply (the Model Registry's alias and Cloud Storage's champion manifest); :mod:`.champion`
applies it to versions and records a promotion or a rollback in a ledger that a generation
precondition makes a compare-and-swap. The register operators fetch and
write through hooks and ask these modules every question of policy.
"""
