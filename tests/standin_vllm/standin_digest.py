"A digest of LoRA tensors shared by the stand-in engine and the test that reads its log (tests only)."


def adapter_digest(tensors: dict) -> str:
    "A digest of LoRA tensors (name -> tensor), the same for a served model and a saved adapter file."
    import hashlib

    h = hashlib.sha256()
    for k in sorted(tensors):
        h.update(k.encode())
        h.update(tensors[k].detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]
