"""hf_ctx: contextual word representations as Hugging Face transformers models.

Importing this package registers its configurations, models and tokenizers with
the transformers Auto classes, so that ``AutoConfig``, ``AutoModel*`` and
``AutoTokenizer`` load hf_ctx checkpoints. Importing it twice is harmless.
"""

__version__ = "0.1.0"

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
)

_AUTO_CONFIGS = []
# (Auto class, model class) pairs; each model section adds its own.
_AUTO_MODELS = []
# (config class, tokenizer class) pairs.
_AUTO_TOKENIZERS = []

# --- BERT -------------------------------------------------------------------
from transformers import BertTokenizer  # hf_ctx BERT uses transformers' WordPiece tokenizer as is

from .configuration_bert import BERT_PRESETS, CtxBertConfig
from .lora import lora_target_modules
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
from .question_answering import QuestionAnsweringPipeline  # transformers 5 has no QA pipeline any more
from .tokenization_bert import train_wordpiece_tokenizer

_AUTO_CONFIGS.append(CtxBertConfig)
_AUTO_MODELS += [
    (AutoModel, CtxBertModel),
    (AutoModelForPreTraining, CtxBertForPreTraining),
    (AutoModelForMaskedLM, CtxBertForMaskedLM),
    (AutoModelForNextSentencePrediction, CtxBertForNextSentencePrediction),
    (AutoModelForSequenceClassification, CtxBertForSequenceClassification),
    (AutoModelForTokenClassification, CtxBertForTokenClassification),
    (AutoModelForQuestionAnswering, CtxBertForQuestionAnswering),
    (AutoModelForMultipleChoice, CtxBertForMultipleChoice),
]
_AUTO_TOKENIZERS.append((CtxBertConfig, BertTokenizer))

# --- ELMo -------------------------------------------------------------------
from .configuration_elmo import ELMO_PRESETS, ElmoConfig
from .layers import CharacterCNN, Highway, LstmCellWithProjection, ProjectedLstm, ScalarMix, WordSoftmax
from .modeling_elmo import (
    ElmoForBiLM,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoPreTrainedModel,
)
from .tokenization_elmo import ElmoTokenizer

_AUTO_CONFIGS.append(ElmoConfig)
_AUTO_MODELS += [
    (AutoModel, ElmoModel),
    (AutoModelForPreTraining, ElmoForBiLM),
    (AutoModelForSequenceClassification, ElmoForSequenceClassification),
    (AutoModelForTokenClassification, ElmoForTokenClassification),
]
_AUTO_TOKENIZERS.append((ElmoConfig, ElmoTokenizer))

# --- TagLM ------------------------------------------------------------------
from .configuration_taglm import TagLMConfig
from .crf import ConditionalRandomField
from .modeling_taglm import TagLMForTokenClassification, TagLMPreTrainedModel
from .tag_schemes import allowed_transitions
from .word_tagging_pipeline import WordFeatureExtractionPipeline, WordTokenClassificationPipeline

_AUTO_CONFIGS.append(TagLMConfig)
_AUTO_MODELS.append((AutoModelForTokenClassification, TagLMForTokenClassification))
_AUTO_TOKENIZERS.append((TagLMConfig, ElmoTokenizer))  # TagLM reads the biLM's characters and word ids


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
from .remote_code import register_remote_code  # noqa: E402

register_remote_code(_AUTO_CONFIGS, _AUTO_MODELS, _AUTO_TOKENIZERS)
