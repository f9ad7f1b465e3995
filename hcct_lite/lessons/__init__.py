"""What the notebooks teach from.

The notebooks' three modes (:mod:`.modes`), their data in every mode (:mod:`.shipped`),
HCCT's decisions read back from runs (:mod:`.decisions`), the studies beyond the paper
(:mod:`.misleads`), the federation designer's model (:mod:`.designer`), Theorem 1's
update similarity (:mod:`.gradient_similarity`), and the exercises that check themselves
(:mod:`.checks`, :mod:`.exercises`: a student's answer is judged against one computed from
the notebook's own data; a wrong one gets a hint that teaches and never the answer).

Notebooks reach these through ``hcct_lite``'s public names; nothing is imported here, so
that importing one module (say :mod:`.modes`) does not load every lesson.
"""
