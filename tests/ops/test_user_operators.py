"""Operators registered by users after ``import jaxdali.fn`` appear in ``fn`` (run in a child process,
so the registry of this one keeps only jaxdali's operators); the one-file helpers take bytes."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.decoders import ImageDecodeError, backend_status, decode_image, decode_path

USER_MODULE = textwrap.dedent('''
    import numpy as np
    from jaxdali import fn, pipeline_def
    from jaxdali.ops.operator import Operator
    from jaxdali.ops.schema import Arg, OpSchema, register
    from jaxdali.tensors import TensorListCPU

    class AddConstant(Operator):
        def run(self, ctx, inputs, args):
            return TensorListCPU(inputs[0].dense() + np.int32(args["value"]))

    assert not hasattr(fn, "add_constant")
    VALUE = (Arg("value", "int", 1, "What to add."),)
    register(OpSchema(name="add_constant", impl=AddConstant, doc="Adds a constant.", args=VALUE))
    register(OpSchema(name="user.add_constant", impl=AddConstant, doc="The same, one level down.", args=VALUE))

    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.arange(4, dtype=np.int32)] * 3, batch=False)
        return fn.add_constant(x, value=5), fn.user.add_constant(x)

    a, b = pipe().run()
    assert (a.as_array() == np.arange(4) + 5).all() and (b.as_array() == np.arange(4) + 1).all()
    assert "add_constant" in fn.__all__ and fn.add_constant.__doc__.startswith("Adds a constant.")
    try:
        register(OpSchema(name="flip", impl=AddConstant, doc="x"))
    except ValueError as e:
        print(e)
''')


@pytest.mark.slow
def test_register_publishes_into_fn_after_import(tmp_path, subprocess_env):
    (tmp_path / "user_ops.py").write_text(USER_MODULE)
    done = subprocess.run([sys.executable, "user_ops.py"], cwd=tmp_path, capture_output=True, text=True,
                          env=subprocess_env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == ("operator 'flip' registered twice: fn.flip already exists; "
                                   "give your operator another name")


@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def _decoded(path):
    jpegs, _ = fn.readers.file(files=[path])
    return fn.decoders.image(jpegs, output_type=types.RGB)


def test_decode_helpers_take_a_files_bytes(flowers_root):
    path = str(sorted(pathlib.Path(flowers_root, "roses").iterdir())[0])
    data = open(path, "rb").read()
    expected_path = "jpeg-opencv" if backend_status()[0] == "opencv" else "jpeg"
    assert decode_path(data) == decode_path(bytearray(data)) == decode_path(np.frombuffer(data, np.uint8)) == expected_path
    (expected,) = _decoded(path).run()
    assert np.array_equal(decode_image(data), expected.as_array()[0])
    with pytest.raises(ImageDecodeError, match=r"sample 0 \('broken.png'\): not a decodable image \(3 bytes"):
        decode_image(b"abc", source="broken.png")
