"""The unit of the regime caps: a fixed program's step time on this machine against the reference machine's."""

import dataclasses
import functools
import math
import time

import jax
import optax

from ffn_research.ablations import regime as regime_lib


@dataclasses.dataclass(frozen=True)
class Cap:
  """A regime's cap on this machine: `ref_s` reference-seconds, `speed` = this machine's reference step over
  regime.REFERENCE_STEP_S (2.0: half as fast), so `run_s` = ref_s * speed run-seconds here."""

  ref_s: float
  speed: float
  step_s: float  # the reference step, seconds: this invocation's, or (judging only) the one the runs recorded
  source: str = 'timed by this invocation'

  @property
  def run_s(self) -> float:
    return self.ref_s * self.speed

  def text(self) -> str:
    return f'{self.ref_s:.0f} reference-seconds = {self.run_s:.0f} run-seconds here'


@functools.cache
def reference_step_s() -> float:
  """Seconds per step of a fixed program, timed once per process (the unit of the caps: regime.REFERENCE_STEP_S):
  one Adam step of a ReLU MLP 64 -> 256 -> 64 on a batch of 128, 200 steps in one lax.scan, the fastest of 7 calls
  after compiling."""
  k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
  x_BD, y_BD = jax.random.normal(k1, (128, 64)), jax.random.normal(k2, (128, 64))
  params = (jax.random.normal(k3, (64, 256)) * 0.1, jax.random.normal(k3, (256, 64)) * 0.1)
  opt = optax.adam(1e-3)

  def loss(p):
    return jax.numpy.mean((jax.nn.relu(x_BD @ p[0]) @ p[1] - y_BD) ** 2)

  def step(carry, _):
    p, st = carry
    u, st = opt.update(jax.grad(loss)(p), st)
    return (optax.apply_updates(p, u), st), None

  run = jax.jit(lambda c: jax.lax.scan(step, c, None, length=200)[0])
  carry = (params, opt.init(params))
  jax.block_until_ready(run(carry))
  times = []
  for _ in range(7):
    t0 = time.perf_counter()
    jax.block_until_ready(run(carry))
    times.append(time.perf_counter() - t0)
  return min(times) / 200  # the least disturbed call: another process on the cores only slows a call down


def machine_cap(regime, recorded_step_s: float | None = None) -> Cap:
  """The regime's cap here; `recorded_step_s` (judging runs already made): the step the invocation that ran them
  timed, so a report re-judged on a busy machine states the cap the runs had."""
  if recorded_step_s:
    source = 'timed by the last invocation that ran runs'
    return Cap(float(regime.cap), recorded_step_s / regime_lib.REFERENCE_STEP_S, recorded_step_s, source)
  step = reference_step_s()
  return Cap(float(regime.cap), step / regime_lib.REFERENCE_STEP_S, step)


def priced_ref_s(ledger, run_s: float, step_s: float) -> float:
  """Reference-seconds of the `run_s` run-seconds on disk, each stretch priced at the reference step of the
  invocation that ran it. `ledger`: [run-seconds on disk when an invocation that trains began, the step it timed],
  in order; what was on disk before the first entry takes the first entry's step; no ledger: all at `step_s`."""
  marks = [(float(a), float(b)) for a, b in (ledger or [])] or [(0.0, step_s)]
  bounds = [0.0] + [a for a, _ in marks[1:]] + [math.inf]
  return sum(
    max(0.0, min(run_s, hi) - lo) * regime_lib.REFERENCE_STEP_S / step
    for lo, hi, (_, step) in zip(bounds[:-1], bounds[1:], marks, strict=True)
  )
