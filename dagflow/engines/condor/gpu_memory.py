"""{gpu.memory_mb} on HTCondor: a `$$([...])` match-time substitution from the machine the job matched.

HTCondor 25 describes each GPU as a nested ad in the machine ad, `GPUs_GPU_<id> = [GlobalMemoryMb = ...]`,
and names a dynamic slot's devices in `AssignedGPUs = "GPU-<id>,..."`. A slot-wide GPUs_GlobalMemoryMb is
left undefined when the GPUs differ, so the value is taken per assigned GPU (measured on the test pool:
a job given the A100 saw 47661, one given the V100 and the A100 saw the smaller, 24220):

    $$([min({eval(strcat("GPUs_", replaceall("-", split(AssignedGPUs, ", ")[0], "_"), ".GlobalMemoryMb")), ...})])

one eval per GPU the step requests, the smallest wins (as locally). The schedule substitutes it when the
job is matched, in the job's arguments and environment, so the program sees a plain number.
"""

from __future__ import annotations

import re

from dagflow.gpu_memory import GPU_MEMORY_MARK

_TERM = 'eval(strcat("GPUs_",replaceall("-",split(AssignedGPUs,", ")[{index}],"_"),".GlobalMemoryMb"))'


def gpu_memory_expression(gpus: int) -> str:
    """The ClassAd expression for the smallest GlobalMemoryMb of the first `gpus` assigned GPUs."""
    terms = [_TERM.format(index=index) for index in range(max(1, gpus))]
    return terms[0] if len(terms) == 1 else "min({" + ",".join(terms) + "})"


def fill_match_time(text: str, gpus: int) -> str:
    """text (finished new-syntax arguments or environment, inside its double quotes) with each
    {gpu.memory_mb} mark replaced by its `$$([...])` reference; the `"` in it doubled as that syntax
    wants. The mark holds no `$`, so the escaping done before cannot have touched it."""
    if GPU_MEMORY_MARK not in text:
        return text
    reference = "$$([" + gpu_memory_expression(gpus).replace('"', '""') + "])"
    return text.replace(GPU_MEMORY_MARK, reference)


_QUOTED_TERM = re.escape(_TERM.replace('"', '""')).replace(r"\{index\}", r"\d+")
# A reference fill_match_time wrote, as it reads inside a submit value: what `dagflow lint` lets through.
MATCH_TIME_REFERENCE = re.compile(
    r"\$\$\(\[(?:" + _QUOTED_TERM + r"|min\(\{" + _QUOTED_TERM + r"(?:," + _QUOTED_TERM + r")*\}\))\]\)"
)


def without_match_time_references(text: str) -> str:
    """text less the {gpu.memory_mb} references dagflow writes (so a check for live `$` can ignore them)."""
    return MATCH_TIME_REFERENCE.sub("", text) if "$$([" in text else text
