"""`corolla info`: the hardware and what Corolla would do on it (backend, strategy, replicas,
global batch, precision); the registered models; the shipped recipes, each as the lines it
logs."""

from __future__ import annotations

import json

from corolla import config
from corolla import models
from corolla import runtime
from corolla.config import recipe
from corolla.config.flags import Given


def recipe_table(log=print) -> None:
    """The shipped recipes as a table (`corolla info --recipes`)."""
    log(f"{'recipe':22s} {'model':18s} {'size':>6s} {'epochs':>6s}  description")
    for row in recipe.table():
        # The data's size to read, else the model's input size at most (<=; from the start
        # size with progressive resizing), else auto.
        size, start = "auto", row["start_size"]
        if row["image_size"]:
            size = f"{row['image_size']}px"
        elif row["input_size"]:
            size = f"{start}-{row['input_size']}" if start else f"<={row['input_size']}"
        log(f"{row['name']:22s} {row['model']:18s} {size:>6s} {row['epochs']:6d}  "
            f"{row['description']}")
    log(f"auto: {recipe.CPU_FINETUNE} on CPUs when pre-trained weights can be had, else "
        f"{recipe.AUTO['cpu']}; {recipe.AUTO['gpu']} on GPUs and TPUs")


def model_table(log=print) -> None:
    """The registered models as a table (`corolla info --models`)."""
    log(f"{'model':20s} {'size':>6s} {'params':>7s}  imagenet  description")
    for name in models.names():
        spec = models.get(name)
        log(f"{name:20s} {spec.image_size:4d}px {spec.params / 1e6:6.1f}M  "
            f"{'yes' if spec.imagenet else 'no':8s}  {spec.description}")
    log(f"{'hub:PRESET':20s} {'':6s} {'':7s}  {'preset':8s}  a keras-hub image classifier "
        f"preset or local preset folder (pip install \"corolla[hub]\")")


def hardware(given: Given = Given(), as_json: bool = False, log=print) -> dict:
    """The plan this machine gets with these runtime and batch settings; returns it as data."""
    cfg = config.load_config(overrides=given.values, labels=given.names)
    info = runtime.detect_for(cfg).to_dict()
    if as_json:
        log(json.dumps(info, indent=2))
        return info
    hw = info["hardware"]
    found = (f"TPU ({hw['tpu']}, {hw['tpu_cores']} cores)" if hw["tpu"] else
             f"{hw['gpus']} GPU(s)" if hw["gpus"] else
             f"{hw['jax_devices']} {hw['jax_platform'].upper()} device(s) via JAX"
             if hw["jax_platform"] in ("tpu", "gpu") else
             f"CPU ({hw['cpu_devices']} logical device(s))")
    if hw["device_name"]:
        found += f": {hw['device_name']}" + (f", {hw['device_memory'] / 2**30:.0f} GiB"
                                             if hw["device_memory"] else "")
    log(f"hardware     {found}")
    log(f"device       {info['accelerator']} ({info['devices']} in this process)")
    log(f"backend      {info['backend']}")
    log(f"strategy     {info['strategy']}")
    log(f"REPLICAS     {info['replicas']}")
    log(f"processes    {info['num_processes']} (this is #{info['process_id']}"
        f"{', chief' if info['is_chief'] else ''})")
    log(f"batch        {info['batch_per_replica']} per replica -> global {info['global_batch']}")
    log(f"precision    {info['precision']}")
    log(f"jit_compile  {'on (XLA)' if info['jit_compile'] else 'off'}")
    log(f"steps/call   {info['steps_per_execution']} (steps per execution)")
    if info["backend"] == "jax":
        log(f"compile cache {info['compile_cache'] or 'off'} (JAX's compiled programs)")
    return info
