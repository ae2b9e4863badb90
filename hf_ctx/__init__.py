"""hf_ctx: contextual word representations as Hugging Face transformers models.

Importing this package registers its configurations, models and tokenizers with
the transformers Auto classes, so that ``AutoConfig``, ``AutoModel*`` and
``AutoTokenizer`` load hf_ctx checkpoints. Importing it twice is harmless.
"""

__version__ = "0.1.0"

# The Auto classes hf_ctx registers with, and BERT's tokenizer (transformers' WordPiece tokenizer as it is), also
# importable from here, so user code needs one import.
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    BertTokenizer,
)

from .configuration_bert import BERT_PRESETS, CtxBertConfig
from .configuration_elmo import ELMO_PRESETS, ElmoConfig
from .configuration_taglm import TagLMConfig
from .crf import ConditionalRandomField
from .data.wordpiece import train_wordpiece_tokenizer
from .layers import (
    CharacterCNN,
    Highway,
    LstmCellWithProjection,
    MaskedBatchNorm,
    ProjectedLstm,
    ScalarMix,
    WordSoftmax,
)
from .modeling_bert import (
    CtxBertForMaskedLM,
    CtxBertForMultipleChoice,
    CtxBertForNextSentencePrediction,
    CtxBertForPreTraining,
    CtxBertForQuestionAnswering,
    CtxBertForSequenceClassification,
    CtxBertForTokenClassification,
    CtxBertModel,
    CtxBertPreTrainedModel,
)
from .modeling_elmo import (
    ElmoForBiLM,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoPreTrainedModel,
)
from .modeling_taglm import TagLMForTokenClassification, TagLMModel, TagLMPreTrainedModel
from .tag_schemes import allowed_transitions
from .tokenization_elmo import ElmoTokenizer
from .tools.families import AUTO_CLASSES, MODEL_FAMILIES  # the registry: every family's classes, per task
from .tools.inspection import plot_attention, plot_scalar_mix
from .tools.lora import lora_target_modules
from .tools.question_answering import QuestionAnsweringPipeline  # transformers 5 has no QA pipeline
from .tools.word_tagging_pipeline import (
    SubwordTokenClassificationPipeline,
    WordFeatureExtractionPipeline,
    WordTokenClassificationPipeline,
)

# The registration tables, derived from the records: config classes, (Auto class, model class) pairs and
# (config class, tokenizer class) pairs.
_AUTO_CONFIGS = [family.config_class for family in MODEL_FAMILIES.values()]
_AUTO_MODELS = [
    (AUTO_CLASSES[task], model_class)
    for family in MODEL_FAMILIES.values()
    for task, model_class in family.models.items()
]
_AUTO_TOKENIZERS = [(family.config_class, family.tokenizer_class) for family in MODEL_FAMILIES.values()]


def _register_auto_classes():
    """Register every hf_ctx config, model and tokenizer with the Auto classes.

    ``exist_ok=True`` makes a second import (or ``importlib.reload``) harmless.
    """
    for config_class in _AUTO_CONFIGS:
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    for auto_class, model_class in _AUTO_MODELS:
        auto_class.register(model_class.config_class, model_class, exist_ok=True)
    for config_class, tokenizer_class in _AUTO_TOKENIZERS:
        AutoTokenizer.register(config_class, tokenizer_class=tokenizer_class, exist_ok=True)


_register_auto_classes()

# --- Remote code: saved checkpoints carry their source (see remote_code.py) --
from transformers.models.auto import configuration_auto  # noqa: E402

from .remote_code import checking_hf_ctx_folders, register_remote_code  # noqa: E402

register_remote_code(_AUTO_CONFIGS, _AUTO_MODELS, _AUTO_TOKENIZERS)
# A saved folder whose model_type was edited is named, never met with transformers' "[y/N]" remote-code prompt.
configuration_auto.resolve_trust_remote_code = checking_hf_ctx_folders(configuration_auto.resolve_trust_remote_code)
