"""What the notebooks teach from.

- :mod:`.modes`: the notebooks' three modes; :mod:`.shipped`: their data in every mode;
- :mod:`.decisions`: HCCT's decisions read back from runs;
- :mod:`.misleads`: the studies beyond the paper; :mod:`.designer`: the designer's model;
- :mod:`.gradient_similarity`: Theorem 1's update similarity;
- :mod:`.checks`, :mod:`.exercises`, :mod:`.answers`: the exercises that check themselves;
- :mod:`.assessment`: each student's own numbers for the final assessment.

Nothing is imported here, so that importing one module does not load every lesson.
"""
