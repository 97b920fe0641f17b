"""tnt.keras.mixed_precision: Keras's dtype policies, "float32" and "mixed_bfloat16".

As in Keras, a layer takes the global policy when it is made (or its own `dtype=`), and the policy
is written into the model's config ("dtype": "mixed_bfloat16"), which the library reads: layers
with a bf16 engine (Dense, convolutions, MultiHeadAttention) compute in bf16 on a CPU with
avx512_bf16 or AMX, while variables, gradients, optimizer state and the loss stay float32.
"""

_NAMES = ("float32", "mixed_bfloat16")


class Policy:
    """A dtype policy: name, compute_dtype and variable_dtype as in Keras."""

    def __init__(self, name):
        self._name = policy_name(name)

    @property
    def name(self):
        return self._name

    @property
    def compute_dtype(self):
        return "bfloat16" if self._name == "mixed_bfloat16" else "float32"

    @property
    def variable_dtype(self):
        return "float32"

    def get_config(self):
        return {"name": self._name}

    def __eq__(self, other):
        return isinstance(other, Policy) and other.name == self.name

    def __repr__(self):
        return f'<Policy "{self._name}">'


DTypePolicy = Policy  # Keras 3's name



# An Embedding's (or a file's layer's) integer dtype: integer ids, computed as float32 by the library
_INTEGER_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


def policy_name(value, integers=False):
    """The policy name of a Keras dtype argument: a name, a Policy, or a Keras 3 DTypePolicy config
    ({"class_name": "DTypePolicy", "config": {"name": ...}}); integers: an integer type is allowed
    too (an Embedding's, or a layer the library read from a file)."""
    if isinstance(value, Policy):
        return value.name
    if isinstance(value, dict):
        value = value.get("config", {}).get("name")
    if integers and value in _INTEGER_NAMES:
        return value
    if value not in _NAMES:
        raise ValueError(f"dtype policy {value!r}: expected one of {', '.join(_NAMES)} "
                         "(mixed_float16 is a GPU policy; use mixed_bfloat16 on CPUs)")
    return value


_global = Policy("float32")


def set_global_policy(policy):
    """Sets the policy of the layers made from now on (None: back to float32)."""
    global _global
    _global = Policy("float32" if policy is None else policy)


def global_policy():
    """The global policy, a Policy."""
    return _global


def native_bfloat16():
    """Whether mixed_bfloat16 layers compute in bf16 on this CPU (avx512_bf16 or AMX, not capped by
    ONEDNN_MAX_CPU_ISA or TNT_MAX_CPU_ISA); else they compute float32, bit for bit as under the
    float32 policy, and the library warns once. A Tarantella addition: Keras has no such query."""
    from tarantella import _core
    _core.ensure_init()  # TNT_MAX_CPU_ISA takes effect in init
    return bool(_core.C.mixed_precision_native())
