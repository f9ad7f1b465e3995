"""The deployment's defences against crafted replies (docs/deploy.md).

:mod:`.layer` composes them around a run; :mod:`.robust` and :mod:`.combine` are the
robust aggregators, :mod:`.rounds` what they read of the whole round; :mod:`.norms` is the
one norm bound they and the norm rule share.
"""
