"""Stand-in for DALI's test helper module ``webdataset_base`` (run.sh links it under that name)."""

import subprocess
import sys
import tempfile


def generate_temp_index_file(tar_file_path: str):
    """An index of ``tar_file_path`` in a temporary file (made by jaxdali's wds2idx tool)."""
    index = tempfile.NamedTemporaryFile()
    subprocess.run([sys.executable, "-m", "jaxdali.tools.wds2idx", tar_file_path, index.name], check=True)
    return index
