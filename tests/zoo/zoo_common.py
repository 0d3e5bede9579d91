"""What the zoo's scripts share: the profiler's allocation peak and a check's first steps."""

import os
import shutil


def allocation_peak(prof):
    """The most bytes held at once during a torch.profiler run (profile_memory=True): its
    allocation and free events summed in the order they happened (ties keep the order they were
    recorded in); what was allocated before the run is not counted."""
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_us())
    held = peak = 0
    for e in events:
        held += e.nbytes()
        peak = max(peak, held)
    return peak


def start_check(name, info, work, folder_name):
    """A check's row and a fresh work folder `work/folder_name`; the folder is None (and the row
    complete) where PyTorch could not export the model."""
    row = {"model": name}
    if "export_error" in info:
        row["status"] = "not exported"
        row["note"] = "PyTorch: " + info["export_error"]
        return row, None
    folder = os.path.join(work, folder_name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return row, folder
