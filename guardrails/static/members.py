"""What S and T may use of each allowed library: lists of members, everything else refused by name.

A module listed here gives only the members listed. A member that is itself a module is listed
with its own members. Every numpy ufunc is allowed too: element-wise arithmetic, pure by
construction. Some modules are not listed: math, statistics, itertools, the test tools ... They
are pure computation through and through, minus `capabilities.DENIED_*`.

The lists hold what pure computation over arrays and frames needs. Some members are left out on
purpose. They import by name, evaluate strings, expose native memory or change process-wide
settings. The worst of them are also refused by object in `capabilities`, so no re-export slips
through. The file readers listed (numpy's `load`, pandas' `read_*`) are for T. T may read its own
data below its folder (`testrules`). S may read no file at all (`capabilities.DENIED_SOURCE`).
"""

from __future__ import annotations


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


NUMPY = _names("""
    ndarray dtype generic number integer signedinteger unsignedinteger floating complexfloating
    inexact character flexible bool bool_ int8 int16 int32 int64 uint8 uint16 uint32 uint64 intp
    uintp int_ uint intc uintc long ulong longlong ulonglong short ushort byte ubyte half single
    double longdouble float16 float32 float64 complex64 complex128 cdouble csingle str_ bytes_
    object_ datetime64 timedelta64 finfo iinfo errstate ufunc
    nan inf pi e euler_gamma newaxis True_ False_
    array asarray asanyarray ascontiguousarray asarray_chkfinite empty empty_like zeros zeros_like
    ones ones_like full full_like arange linspace logspace geomspace eye identity diag diagflat
    tri tril triu vander meshgrid mgrid ogrid indices fromiter fromfunction copy atleast_1d
    atleast_2d atleast_3d r_ c_ s_ index_exp ix_ diag_indices tril_indices triu_indices
    reshape ravel transpose permute_dims matrix_transpose swapaxes moveaxis rollaxis expand_dims
    squeeze concatenate concat stack unstack vstack hstack dstack column_stack block split
    array_split hsplit vsplit dsplit tile repeat flip fliplr flipud roll rot90 broadcast_to
    broadcast_arrays broadcast_shapes append insert delete resize pad trim_zeros shape ndim size
    astype diagonal
    sum prod cumsum cumprod cumulative_sum cumulative_prod mean average median std var min max
    amin amax ptp percentile quantile nansum nanprod nancumsum nancumprod nanmean nanmedian nanstd
    nanvar nanmin nanmax nanpercentile nanquantile nanargmin nanargmax corrcoef cov correlate
    convolve histogram histogram_bin_edges bincount digitize diff ediff1d gradient trapezoid cross
    dot vdot inner outer tensordot einsum kron trace count_nonzero all any around round clip
    interp nan_to_num real imag angle unwrap sinc i0 fix real_if_close apply_along_axis
    sort argsort lexsort partition argpartition searchsorted argmax argmin nonzero flatnonzero
    where argwhere extract select choose compress take take_along_axis piecewise unique
    unique_all unique_counts unique_inverse unique_values intersect1d union1d setdiff1d setxor1d
    isin unravel_index ravel_multi_index
    allclose isclose array_equal array_equiv isscalar iscomplexobj isrealobj isreal iscomplex
    isneginf isposinf result_type promote_types can_cast issubdtype isdtype common_type
    min_scalar_type ndenumerate ndindex
    random linalg fft typing exceptions lib testing
    load loadtxt genfromtxt""")
# numpy.random: generators and bit generators.
# The global generator's functions are the clock rules' business: they are refused there whatever
# the seed.
NUMPY_RANDOM = _names("""
    default_rng Generator BitGenerator SeedSequence PCG64 PCG64DXSM MT19937 Philox SFC64
    RandomState seed""")
NUMPY_LIB = _names("stride_tricks")
NUMPY_STRIDE_TRICKS = _names("sliding_window_view")
NUMPY_TESTING = _names("""
    assert_allclose assert_array_equal assert_array_almost_equal assert_array_less assert_equal
    assert_almost_equal assert_approx_equal assert_raises assert_array_max_ulp""")
PANDAS = _names("""
    DataFrame Series Index MultiIndex RangeIndex DatetimeIndex TimedeltaIndex PeriodIndex
    CategoricalIndex IntervalIndex Timestamp Timedelta Period Interval NaT NA DateOffset offsets
    Categorical CategoricalDtype DatetimeTZDtype PeriodDtype IntervalDtype SparseDtype StringDtype
    BooleanDtype Int8Dtype Int16Dtype Int32Dtype Int64Dtype UInt8Dtype UInt16Dtype UInt32Dtype
    UInt64Dtype Float32Dtype Float64Dtype Grouper NamedAgg IndexSlice Flags array arrays errors
    api tseries
    concat merge merge_asof merge_ordered isna isnull notna notnull to_datetime to_numeric
    to_timedelta date_range bdate_range period_range timedelta_range interval_range infer_freq
    cut qcut unique factorize value_counts get_dummies from_dummies pivot pivot_table melt
    crosstab wide_to_long lreshape json_normalize
    testing read_csv read_json read_table read_fwf read_parquet read_feather read_excel""")
PANDAS_API = _names("types")
PANDAS_TESTING = _names("""
    assert_frame_equal assert_series_equal assert_index_equal assert_extension_array_equal""")
# pydantic: models, fields, validators and constrained types.
# No path, URL, DSN, import or deprecated parsing types.
PYDANTIC = _names("""
    BaseModel RootModel Field PrivateAttr ConfigDict computed_field field_validator
    model_validator field_serializer model_serializer validator root_validator ValidationError
    ValidationInfo AfterValidator BeforeValidator PlainValidator WrapValidator PlainSerializer
    WrapSerializer Strict StrictBool StrictInt StrictFloat StrictStr StrictBytes PositiveInt
    PositiveFloat NegativeInt NegativeFloat NonNegativeInt NonNegativeFloat NonPositiveInt
    NonPositiveFloat FiniteFloat AllowInfNan StringConstraints conint confloat constr conlist
    conset confrozenset condecimal condate InstanceOf SkipValidation AliasChoices AliasPath
    Discriminator Tag JsonValue dataclasses create_model with_config TypeAdapter VERSION""")
# logging: loggers and levels (no handlers, configuration or logger classes)
LOGGING = _names("""
    getLogger Logger LoggerAdapter NullHandler Filter LogRecord getLevelName CRITICAL FATAL
    ERROR WARNING WARN INFO DEBUG NOTSET debug info warning error exception critical log""")
RE = _names("""
    compile search match fullmatch split findall finditer sub subn escape Pattern Match error
    RegexFlag NOFLAG A ASCII I IGNORECASE L LOCALE M MULTILINE S DOTALL X VERBOSE U UNICODE""")
# typing and typing_extensions: annotations and their helpers (none that evaluates a string)
TYPING = _names("""
    Any Callable ClassVar Final Generic Literal Optional Protocol Union Annotated TypeVar
    ParamSpec TypeVarTuple Concatenate Self Never NoReturn LiteralString TypeAlias TypeGuard
    TypeIs Required NotRequired ReadOnly Unpack TypedDict NamedTuple NewType TYPE_CHECKING
    AbstractSet ByteString Container Collection Hashable ItemsView Iterable Iterator KeysView
    Mapping MappingView MutableMapping MutableSequence MutableSet Sequence Sized ValuesView
    Awaitable AsyncIterator AsyncIterable Coroutine Generator AsyncGenerator Reversible
    SupportsAbs SupportsBytes SupportsComplex SupportsFloat SupportsIndex SupportsInt
    SupportsRound ChainMap Counter Deque Dict DefaultDict List OrderedDict Set FrozenSet Tuple
    Type Text AnyStr Pattern Match cast overload final runtime_checkable no_type_check
    assert_never assert_type reveal_type dataclass_transform override get_args get_origin
    is_typeddict deprecated Buffer""")

MEMBERS: dict[str, frozenset[str]] = {
    "numpy": NUMPY,
    "numpy.random": NUMPY_RANDOM,
    "numpy.lib": NUMPY_LIB,
    "numpy.lib.stride_tricks": NUMPY_STRIDE_TRICKS,
    "numpy.testing": NUMPY_TESTING,
    "pandas": PANDAS,
    "pandas.api": PANDAS_API,
    "pandas.testing": PANDAS_TESTING,
    "pydantic": PYDANTIC,
    "logging": LOGGING,
    "re": RE,
    "typing": TYPING,
    "typing_extensions": TYPING,
}
