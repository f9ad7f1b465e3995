"""Crafted silos for the attack table: replies a Flower silo could send, made in process.

:class:`AttackBackend` wraps the local backend and replaces the attackers' training replies
(and, for the count attacks, the count they declare at enrolment) with crafted ones. Each
crafted reply is a trained model ``start - lr * g`` for a crafted update ``g``, so it passes
through the same reply screen, norm rule and aggregator as a real silo's. The attacker knows
the code and, where an attack says so, every honest reply of the round:

- ``boost``: its own update x 10^6; ``flip``: x -1;
- ``flip-0.9``: its own update's sign flipped, stretched to 0.9 times what the norm rule lets
  it send (from the round's replies and the counts the server vouches for); any robust rule
  cuts it to the top of its band, so for them this is the flip at the band's top;
- ``ipm``: inner-product manipulation, ``-3`` times the honest silos' mean update (Xie et
  al., 2020);
- ``alie``: "a little is enough", the honest mean minus one standard deviation, coordinate
  by coordinate (Baruch et al., 2019, with z = 1);
- ``mimic``: on even epochs a copy of silo 1's update (so a partition groups it with silo 1),
  on odd ones silo 1's update flipped and stretched as ``flip-0.9``;
- ``x-28125``: its own update x -28,125 (no knowledge of any other silo);
- ``count``: 10^6 training samples declared at enrolment and reported; ``count+A``: that
  claim and attack ``A``;
- ``1e37``: one reply (epoch 1) whose every weight is 10^37, finite;
- ``sleeper``: a poisoned *model* rather than an update: while alone (HCCT's singletons),
  its start with the classifier's rows turned by one class (each digit read as the next)
  and scaled 1000 times; then a copy of silo 1's update, so that the partition groups it
  with silo 1, whose group then starts from the average of their models; ``sleeper-0.9``:
  the same, its model moved towards the poisoned one by 0.9 times the norm rule's
  allowance;
- ``absent``: silo 0 never answers; ``lazy``: it sends back the model it received (it
  trains nothing and knows nothing; its trained buffers aside, and the table's model has
  none);
- ``flip-3``: its own update x -3 (what a colluder that knows only its own data sends);
- ``timid``: its own update x 10^-3 (a silo that says almost nothing: Krum favours short
  updates, and a band set by a group's own norms would take the shorter of two);
- ``noise``: a random direction, 10^-3 times its own update's norm (it knows nothing; a band
  raises it to an honest length);
- ``fang``: an adaptive silo in the manner of Fang et al. (2020) against Krum. It knows the
  code and the round's honest replies of its group. It sends minus the sign of their mean
  update, turned so that the model's last movement (which it receives) does not call it
  against, at the longest norm the norm rule, the clip and Krum still keep;
- ``sybil``: every attacker sends one vector, the first one's own update x -3;
  ``sybil-noisy``: that vector plus noise of 0.2 times its norm, each its own, so that no
  two are closer than the one-voice rule's 0.1 (an attacker that knows the rule);
  ``sybil-wide``: noise of 1 times its norm, as far apart as honest silos sit.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from hcct_lite.deploy.defences.combine import _krum_choice
from hcct_lite.deploy.defences.norms import local_steps, norm_bound, update_norm
from hcct_lite.deploy.defences.robust import Aggregator, vouched_counts
from hcct_lite.deploy.defences.rounds import RoundView, banded
from hcct_lite.training.local import update_of

CLAIM = 10**6
SYBIL_NOISE = {"sybil-noisy": 0.2, "sybil-wide": 1.0}  # each Sybil's noise, x the vector's norm
SCALE = {"boost": 1e6, "flip": -1.0, "x-28125": -28125.0, "flip-3": -3.0, "timid": 1e-3}
VICTIM = 1


def _noise(like: torch.Tensor, epoch: int, i: int, length: float) -> torch.Tensor:
    """A random direction of ``length``, seeded by epoch and silo: the same run, the same noise."""
    gen = torch.Generator().manual_seed(1000 * epoch + i)
    noise = torch.randn(like.shape, generator=gen, dtype=like.dtype)
    return noise * (length / max(float(noise.norm()), 1e-30))


def _flat(update, names) -> torch.Tensor:
    return torch.cat([update[k].reshape(-1).float() for k in names])


class AttackBackend:
    """The local backend, with the ``attackers``' replies replaced by ``attack``'s."""

    def __init__(self, inner, attack: str, names, attackers, cfg):
        self.inner, self.names, self.attackers = inner, list(names), list(attackers)
        self.count = attack.startswith("count")
        self.attack = attack.removeprefix("count").removeprefix("+") or "none"
        self.norm_limit = cfg.option("norm_limit")
        self._last = None  # the sleeper's last reply: "poison" or "copy"
        self._starts, self._before = {}, {}  # fang: the models it received, now and before
        self.aggregator = Aggregator(
            cfg.option("aggregator"),
            cfg.option("clip_factor"),
            cfg.option("trim_fraction"),
            cfg.batch_size,
            cfg.local_epochs,
        )
        self.sizes = inner.sizes.copy()
        if self.count:
            self.sizes[self.attackers] = CLAIM
        self.domains = inner.domains
        # what the server will make of the counts: the steps its rules allow each silo
        sizes = vouched_counts(self.sizes, cfg.option("count_bound"))
        self.steps = local_steps(sizes, cfg.batch_size, cfg.local_epochs).astype(float)

    def _allowance(self, out, i) -> float:
        """The longest update the norm rule lets silo i send, from the round's replies."""
        ids = list(out)
        norms = [update_norm(out[j].update) for j in ids]
        bound = norm_bound(norms, [self.steps[j] for j in ids], self.norm_limit)
        return float(bound.limits[ids.index(i)])

    def _poisoned(self, i, start, out, lr) -> torch.Tensor:
        """Silo i's update to the poisoned model: the classifier turned, x 1000 (or 0.9x)."""
        head = self.names[-2:]  # the last layer's weight and bias
        g = (
            torch.cat(
                [
                    (start[k] - (1000 * torch.roll(start[k], 1, dims=0) if k in head else start[k]))
                    .reshape(-1)
                    .float()
                    for k in self.names
                ]
            )
            / lr
        )
        if self.attack == "sleeper-0.9":
            g = g * (0.9 * self._allowance(out, i) / max(float(g.norm()), 1e-30))
        return g

    def _crafted(self, i, out, epoch) -> torch.Tensor | None:
        """Silo i's crafted update (flat, over ``names``), or None to send its own."""
        own = _flat(out[i].update, self.names)
        honest = [_flat(r.update, self.names) for j, r in out.items() if j not in self.attackers]
        kind = self.attack
        if kind == "mimic":
            if VICTIM not in out:
                return None
            own = _flat(out[VICTIM].update, self.names)
            kind = "copy" if epoch % 2 == 0 else "flip-0.9"
        if kind == "copy":
            return own
        if kind == "flip-0.9":
            return -own * (0.9 * self._allowance(out, i) / max(float(own.norm()), 1e-30))
        if kind in SCALE:
            return own * SCALE[kind]
        if kind == "lazy":
            return torch.zeros_like(own)
        if kind == "noise":
            return _noise(own, epoch, i, 1e-3 * float(own.norm()))
        if kind == "fang":
            return self._fang(i, out)
        if kind.startswith("sybil"):
            first = min(j for j in self.attackers if j in out)
            g = -3.0 * _flat(out[first].update, self.names)
            if kind in SYBIL_NOISE:
                g = g + _noise(g, epoch, i, SYBIL_NOISE[kind] * float(g.norm()))
            return g
        if kind in ("ipm", "alie") and honest:
            h = torch.stack(honest)
            if kind == "ipm":
                return -3.0 * h.mean(0)
            return h.mean(0) - h.std(0, correction=0)
        return None

    def _fang(self, i, out) -> torch.Tensor | None:
        """The longest sign-flipped update that the server's rules keep in silo i's group."""
        start = self._starts[i]
        peers = [j for j in out if j not in self.attackers and self._starts[j] is start]
        if not peers:
            return None
        g = -torch.sign(torch.stack([_flat(out[j].update, self.names) for j in peers]).mean(0))
        before = self._before.get(i)
        if before is not None:  # a delta is -lr * g: keep g . movement a little below 0
            moved = _flat(start, self.names) - before
            if float(moved.norm()) > 0:
                m = moved / moved.norm()
                g = g - (g @ m) * m - 0.05 * float(g.norm()) * m
        g = g / max(float(g.norm()), 1e-30)
        ids = [i, *peers]
        steps = [self.steps[j] for j in ids]
        longest = self._allowance(out, i)
        norms = {j: update_norm(out[j].update) for j in out if j not in self.attackers}
        for k in range(16):  # halving from the norm rule's edge until Krum keeps it
            crafted = g * (longest * 0.5**k)
            deltas = [{"w": -crafted}] + [{"w": -_flat(out[j].update, self.names)} for j in peers]
            sent = norms | {i: float(crafted.norm())}  # what the server's view will hold
            view = RoundView(None, sent, {j: self.steps[j] for j in sent})
            clipped = banded(deltas, steps, self.aggregator.clip_factor, ids, view)
            if len(ids) <= 3 or 0 in _krum_choice(clipped, max(1, (len(ids) - 3) // 2)):
                return crafted
        return crafted

    def _reply(self, r, start, lr, g):
        state, offset = dict(r.state), 0
        for k in self.names:
            m = start[k].numel()
            state[k] = start[k] - lr * g[offset : offset + m].view_as(start[k]).to(start[k].dtype)
            offset += m
        return dataclasses.replace(r, state=state, update=update_of(start, state, lr, self.names))

    def train(self, starts, lr, epoch):
        out = self.inner.train(starts, lr, epoch)
        if self.attack == "absent":
            for i in self.attackers:
                out.pop(i, None)
            return out
        if self.attack.startswith("sleeper"):
            return self._sleep(starts, lr, epoch, out)
        if self.attack == "fang":  # it remembers the models it received
            for i in self.attackers:
                if i in starts and i in self._starts:
                    self._before[i] = _flat(self._starts[i], self.names)
            self._starts.update(starts)
        crafted = {i: self._crafted(i, out, epoch) for i in self.attackers if i in out}
        for i, g in crafted.items():
            r = out[i]
            if self.attack == "1e37" and epoch == 1:
                state = {
                    k: torch.full_like(v, 1e37) if v.is_floating_point() else v
                    for k, v in r.state.items()
                }
                update = update_of(starts[i], state, lr, self.names)
                r = dataclasses.replace(r, state=state, update=update)
            elif g is not None:
                r = self._reply(r, starts[i], lr, g)
            if self.count:
                r = dataclasses.replace(r, n_samples=CLAIM)
            out[i] = r
        return out

    def _sleep(self, starts, lr, epoch, out):
        """The sleeper's reply: poison while alone (once), else a copy of silo 1's update."""
        for i in self.attackers:
            if i not in out or VICTIM not in out:
                continue
            alone = starts[i] is not starts[VICTIM] or epoch == 0
            poison = alone and self._last != "poison"
            self._last = "poison" if poison else "copy"
            g = (
                self._poisoned(i, starts[i], out, lr)
                if poison
                else _flat(out[VICTIM].update, self.names)
            )
            out[i] = self._reply(out[i], starts[i], lr, g)
        return out

    def evaluate(self, states):
        return self.inner.evaluate(states)

    def probe(self, i, state):
        return self.inner.probe(i, state)


def honest_mean(errors, seats) -> float:
    """The mean final error (%) of the clients not in ``seats`` that answered."""
    kept = [e for i, e in enumerate(errors) if i not in seats and e is not None]
    return float(np.mean(kept)) if kept else float("nan")
