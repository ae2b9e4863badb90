"""A linear-chain conditional random field for sequence tagging (Lafferty et al., 2001), as in AllenNLP.

Shapes below use B = batch, S = sequence length (words), T = number of tags.

The CRF scores a tag sequence y_1..y_n for emissions e (B, S, T) as

    start[y_1] + sum_i e[i, y_i] + sum_i transitions[y_i, y_{i+1}] + end[y_n]

and the log-likelihood of the gold sequence is its score minus log Z, the log-sum-exp over all sequences
(forward algorithm). Transitions that a tagging scheme forbids (e.g. `O -> I-PER` in BIO; see
`tag_schemes.allowed_transitions`) get a fixed penalty of -10000 instead of -inf, as AllenNLP does. The finite
penalty keeps the log-likelihood finite (no NaN gradients) if a gold sequence breaks the scheme, while no decoded
sequence ever uses such a transition in practice.

Masks are (B, S) booleans that are True on a prefix of each row (the words of the sentence, padding after).
A row with no word has log-likelihood 0 and decodes to no tag. Everything runs in float32, also inside
`torch.autocast`, because log-sum-exp over long sentences loses too much in half precision.
"""

import torch
from torch import nn
from transformers import initialization as init

from .input_checks import IGNORE_INDEX, values_outside
from .tag_schemes import allowed_transitions

# Score given to a forbidden transition (see the module docstring for why it is finite).
FORBIDDEN_SCORE = -10000.0


class ConditionalRandomField(nn.Module):
    """Linear-chain CRF over `num_tags` tags with learned transition, start and end scores.

    Args:
        num_tags: number of tags T.
        constraints: allowed (from_id, to_id) pairs as returned by `tag_schemes.allowed_transitions` (ids T and
            T + 1 are the sentence start and end); every other transition scores `FORBIDDEN_SCORE`. `None` allows
            all.
        include_start_end_transitions: learn a score for the first and the last tag of a sentence.
    """

    def __init__(
        self,
        num_tags: int,
        constraints: list[tuple[int, int]] | None = None,
        include_start_end_transitions: bool = True,
    ):
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"num_tags must be at least 1, got {num_tags}")
        self.num_tags = num_tags
        self.include_start_end_transitions = include_start_end_transitions
        # transitions[i, j] scores tag i followed by tag j.
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        if include_start_end_transitions:
            self.start_transitions = nn.Parameter(torch.empty(num_tags))
            self.end_transitions = nn.Parameter(torch.empty(num_tags))
        # allowed[i, j] for i, j in 0..T+1 (T = start, T + 1 = end): a buffer, so it moves with the module, but
        # not saved: it is rebuilt from the constraints (which a model rebuilds from its config).
        self.constraints = None if constraints is None else sorted(set(constraints))
        self.register_buffer("allowed", self.allowed_table(), persistent=False)
        self.reset_parameters()

    def allowed_table(self) -> torch.Tensor:
        """(T + 2, T + 2) booleans: which transitions `constraints` allow (all when there are none)."""
        allowed = torch.ones(self.num_tags + 2, self.num_tags + 2, dtype=torch.bool)
        if self.constraints is not None:
            allowed.fill_(False)
            for i, j in self.constraints:
                allowed[i, j] = True
        return allowed

    @torch.no_grad()
    def reset_parameters(self):
        nn.init.xavier_normal_(self.transitions)
        if self.include_start_end_transitions:
            nn.init.normal_(self.start_transitions)
            nn.init.normal_(self.end_transitions)

    def _scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Transition (T, T), start (T,) and end (T,) scores in float32 with forbidden ones replaced."""
        t = self.num_tags
        transitions = self.transitions.float().masked_fill(~self.allowed[:t, :t], FORBIDDEN_SCORE)
        if self.include_start_end_transitions:
            start, end = self.start_transitions.float(), self.end_transitions.float()
        else:
            start = end = torch.zeros(t, device=transitions.device)
        start = start.masked_fill(~self.allowed[t, :t], FORBIDDEN_SCORE)
        end = end.masked_fill(~self.allowed[:t, t + 1], FORBIDDEN_SCORE)
        return transitions, start, end

    def _check(self, emissions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Validate shapes and the prefix mask; returns the mask as (B, S) bool."""
        if emissions.dim() != 3 or emissions.shape[-1] != self.num_tags:
            raise ValueError(
                f"emissions must have shape (batch, sequence, {self.num_tags}), got {tuple(emissions.shape)}"
            )
        if emissions.shape[1] == 0:
            raise ValueError("emissions have sequence length 0; a batch needs at least one position")
        if mask is None:
            return torch.ones(emissions.shape[:2], dtype=torch.bool, device=emissions.device)
        if tuple(mask.shape) != tuple(emissions.shape[:2]):
            raise ValueError(f"mask has shape {tuple(mask.shape)}, emissions {tuple(emissions.shape)}")
        mask = mask.bool()
        # A row that turns back on after padding would be scored as if the gap were not there.
        if mask.shape[1] > 1 and (mask[:, 1:] & ~mask[:, :-1]).any():
            raise ValueError("mask must be True on a prefix of each row (words first, padding after)")
        return mask

    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Log-likelihood of `tags` given `emissions`.

        Args:
            emissions: (B, S, T) unnormalised tag scores for every word.
            tags: (B, S) gold tag ids; positions outside the mask are ignored (any value, e.g. -100).
            mask: (B, S) True on the words of each sentence; all True when `None`.

        Returns:
            (B,) float32 log-likelihood of each sentence (0 for a sentence without words).
        """
        mask = self._check(emissions, mask)
        if tuple(tags.shape) != tuple(mask.shape):
            raise ValueError(f"tags have shape {tuple(tags.shape)}, emissions {tuple(emissions.shape)}")
        inside = tags.long().masked_fill(~mask, 0)
        (outside,), _ = values_outside([(inside, self.num_tags)])
        if outside is not None:
            raise ValueError(
                f"tags inside the mask must be in [0, {self.num_tags}), got {inside.min()}..{inside.max()}"
            )
        return self.log_likelihood(emissions, tags, mask)

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`forward` without its input checks, for a model that checked these inputs where they entered (TagLM):
        `mask` (B, S) booleans, True on a prefix of each row; `tags` (B, S) in [0, T) inside it."""
        tags = tags.long().masked_fill(~mask, 0)
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            emissions = emissions.float()
            return self._gold_score(emissions, tags, mask) - self._log_partition(emissions, mask)

    def _gold_score(self, emissions, tags, mask):
        transitions, start, end = self._scores()
        mask_f = mask.float()
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, S)
        score = (emitted * mask_f).sum(1)
        score = score + (transitions[tags[:, :-1], tags[:, 1:]] * mask_f[:, 1:]).sum(1)
        lengths = mask.sum(1)
        last_tags = tags.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        has_words = lengths > 0
        return score + torch.where(has_words, start[tags[:, 0]] + end[last_tags], 0.0)

    # The loops below run one step per word, so each op inside them is a kernel launch per word (what bounds
    # the CRF on a GPU). They do only the recurrence there: slicing by time is one `unbind` beforehand, and
    # instead of freezing finished rows step by step (a `where` per word), each row's value is read at its last
    # word afterwards, in one `gather`. The arithmetic is the textbook recursion's, in the same order.

    def _log_partition(self, emissions, mask):
        """log Z (B,) by the forward algorithm, with its gradient from the forward-backward algorithm."""
        transitions, start, end = self._scores()
        return LogPartition.apply(emissions, transitions, start, end, mask)

    def _viterbi_forward(self, emissions, mask):
        """Max-product forward pass: best prefix scores and back-pointers, each a list of S (B, T) tensors
        (position i: best score of a prefix ending at word i in each tag, and the tag at word i - 1 it comes
        from; values after a row's last word are not meaningful)."""
        transitions, start, end = self._scores()
        words = emissions.unbind(1)
        alpha = start + words[0]
        alphas, backpointers = [alpha], [torch.zeros_like(alpha, dtype=torch.long)]
        for emitted in words[1:]:
            best, best_from = (alpha.unsqueeze(2) + transitions).max(dim=1)
            alpha = best + emitted
            alphas.append(alpha)
            backpointers.append(best_from)
        return alphas, backpointers, transitions, end

    def viterbi_decode(
        self, emissions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The highest-scoring tag sequence of each sentence.

        Args:
            emissions: (B, S, T) unnormalised tag scores.
            mask: (B, S) True on the words of each sentence; all True when `None`.

        Returns:
            tags: (B, S) long, the best sequence; `IGNORE_INDEX` (-100) outside the mask.
            scores: (B,) float32 score of that sequence (0 for a sentence without words).
        """
        mask = self._check(emissions, mask)
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            alphas, backpointers, _, end = self._viterbi_forward(emissions.float(), mask)
            lengths = mask.sum(1)
            last = (lengths - 1).clamp(min=0)
            scores, last_tag = (last_word_values(alphas, mask) + end).max(dim=1, keepdim=True)  # (B, 1) each
            # Walk the back-pointers from each sentence's last word to its first: a row starts its walk at its
            # last word (where `ends_here`); before that its tags are placeholders, masked below.
            steps = torch.arange(mask.shape[1], device=mask.device)
            ends_here = (steps[:, None] == last[None, :]).unsqueeze(2).unbind(0)  # S x (B, 1)
            tag, tags = last_tag, [None] * mask.shape[1]
            for i in range(mask.shape[1] - 1, -1, -1):
                tag = torch.where(ends_here[i], last_tag, tag)
                tags[i] = tag
                if i > 0:
                    tag = backpointers[i].gather(1, tag)
            best = torch.cat(tags, dim=1).masked_fill(~mask, IGNORE_INDEX)
            return best, torch.where(lengths > 0, scores.squeeze(1), 0.0)

    def max_marginals(self, emissions: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """For every word i and tag j, the score of the best whole sequence that puts tag j at word i.

        Their argmax over tags at each word is the Viterbi sequence (barring exact ties), and each word's
        maximum equals the Viterbi score, so they serve as per-word "logits" that agree with CRF decoding.

        Args:
            emissions: (B, S, T) unnormalised tag scores.
            mask: (B, S) True on the words of each sentence; all True when `None`.

        Returns:
            (B, S, T) float32 scores, 0 outside the mask.
        """
        return self.max_marginal_scores(emissions, self._check(emissions, mask))

    def max_marginal_scores(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`max_marginals` without its input checks, for a model that checked `mask` where it entered (TagLM):
        (B, S) booleans, True on a prefix of each row."""
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            emissions = emissions.float()
            # alphas[i][:, j] (S x (B, T)): best score of words 0..i with tag j at i (its emission included).
            alphas, _, transitions, end = self._viterbi_forward(emissions, mask)
            # beta[:, i, j]: best score of the words after i given tag j at i, end transition included.
            words = emissions.unbind(1)
            # Where word i + 1 is padding, word i is its sentence's last (or padding itself): beta restarts at `end`.
            has_next = mask[:, 1:].unsqueeze(2).unbind(1)  # (S - 1) x (B, 1)
            beta = end.expand(emissions.shape[0], -1)  # (B, T): after the last word only the end transition
            betas = [beta]
            for i in range(emissions.shape[1] - 2, -1, -1):
                # (T_from, T_to) + (B, 1, T_to) -> (B, T_from, T_to), maximised over the tag at word i + 1.
                step = (transitions + (words[i + 1] + beta).unsqueeze(1)).max(dim=2).values  # (B, T)
                beta = torch.where(has_next[i], step, end)
                betas.append(beta)
            betas = torch.stack(betas[::-1], 1)  # (B, S, T), word 0 first
            # Best score before word i, plus after it: the best whole sequence through tag j at word i.
            return (torch.stack(alphas, 1) + betas).masked_fill(~mask.unsqueeze(2), 0.0)


def tagger_crf(config) -> ConditionalRandomField:
    """The CRF of a tagger's config (TagLM's, or BERT's and ELMo's with `use_crf`): `config.num_labels` tags, with
    the transitions `config.tag_scheme` allows between the labels of `config.id2label` (every one when None)."""
    constraints = None
    if config.tag_scheme is not None:
        constraints = allowed_transitions(config.tag_scheme, {int(k): v for k, v in config.id2label.items()})
    return ConditionalRandomField(config.num_labels, constraints)


def init_crf_weights(module: ConditionalRandomField) -> None:
    """A model's `_init_weights` for its CRF. The allowed-transitions table is not saved, so a model loaded with
    `from_pretrained` (built on the meta device) gets its constraints here."""
    init.copy_(module.allowed, module.allowed_table())
    init.xavier_normal_(module.transitions)
    if module.include_start_end_transitions:
        init.normal_(module.start_transitions)
        init.normal_(module.end_transitions)


def crf_logits_and_loss(
    crf: ConditionalRandomField, emissions: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A CRF tagger's outputs from its emissions (B, S, T), prefix word mask (B, S) and checked labels (B, S) or
    None: the max-marginal scores (B, S, T) as logits, whose argmax is the Viterbi tag sequence, and the mean over
    sentences of the negative log-likelihood of the labels (None without labels)."""
    # The CRF's own checks would repeat the model's: its unchecked methods take the checked inputs.
    loss = -crf.log_likelihood(emissions, labels, mask).mean() if labels is not None else None
    return crf.max_marginal_scores(emissions, mask), loss


class LogPartition(torch.autograd.Function):
    """log Z of a linear-chain CRF, 0 for rows without words: (emissions (B, S, T), transitions (T, T), start (T,),
    end (T,), prefix mask (B, S)) -> (B,).

    Forward: the forward algorithm, alpha[b, i, j] = log-sum-exp of the scores of all prefixes ending in tag j at
    word i. Backward: the gradients of log Z are the tag marginals (emissions, start, end) and the transition
    marginals (transitions), from alpha and the backward algorithm's beta[b, i, j] (log-sum-exp of the scores of
    all continuations after tag j at word i), computed for all words at once. This replaces autograd's backward
    through the per-word loop, which costs several ops per word (broadcast sums, accumulations) on top of the loop
    the backward algorithm needs anyway.
    """

    @staticmethod
    def forward(ctx, emissions, transitions, start, end, mask):
        words = emissions.unbind(1)  # S x (B, T)
        alpha = start + words[0]
        alphas = [alpha]
        for emitted in words[1:]:
            # (B, T_from, 1) + (T_from, T_to) + (B, 1, T_to), summed out over T_from.
            alpha = _logsumexp(alpha.unsqueeze(2) + transitions + emitted.unsqueeze(1), dim=1)
            alphas.append(alpha)
        log_z = _logsumexp(last_word_values(alphas, mask) + end, dim=1)
        ctx.save_for_backward(emissions, transitions, end, mask, torch.stack(alphas, 1), log_z)
        return torch.where(mask[:, 0], log_z, 0.0)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        emissions, transitions, end, mask, alphas, log_z = ctx.saved_tensors
        # scores[:, i, a, b]: transition a -> b into word i + 1 plus its emission, for all words in one op.
        scores = (transitions + emissions[:, 1:].unsqueeze(2)).unbind(1)  # (S - 1) x (B, T, T)
        # Where word i + 1 is padding, word i is its sentence's last (or padding itself): beta restarts at `end`.
        has_next = mask[:, 1:].unsqueeze(2).unbind(1)  # (S - 1) x (B, 1)
        beta = end.expand(emissions.shape[0], -1)
        betas = [beta]
        for i in range(emissions.shape[1] - 2, -1, -1):
            beta = torch.where(has_next[i], _logsumexp(scores[i] + beta.unsqueeze(1), dim=2), end)
            betas.append(beta)
        betas = torch.stack(betas[::-1], 1)  # (B, S, T)
        grad = torch.where(mask[:, 0], grad, 0.0)
        log_z = log_z.view(-1, 1, 1)
        # Outside the mask alpha is not meaningful: -inf there gives probability 0 (a product with 0 could be NaN).
        tag_marginals = (alphas + betas - log_z).masked_fill(~mask.unsqueeze(2), float("-inf")).exp()  # (B, S, T)
        grad_emissions = grad.view(-1, 1, 1) * tag_marginals
        grad_start = grad @ tag_marginals[:, 0]
        lengths = mask.sum(1)
        grad_end = grad @ tag_marginals.gather(
            1, (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, tag_marginals.shape[2])
        ).squeeze(1)
        # P(tag a at word i, tag b at word i + 1) for every pair of words inside the mask: (B, S - 1, T, T).
        after = (emissions[:, 1:] + betas[:, 1:]).unsqueeze(2)  # (B, S - 1, 1, T_to)
        pairs = alphas[:, :-1].unsqueeze(3) + transitions + after - log_z.unsqueeze(3)
        pair_marginals = pairs.masked_fill(~mask[:, 1:, None, None], float("-inf")).exp()
        grad_transitions = torch.einsum("b,bsij->ij", grad, pair_marginals)
        return grad_emissions, grad_transitions, grad_start, grad_end, None


def _logsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """`torch.logsumexp(x, dim)` with the same arithmetic in fewer kernels, for use without autograd (inside
    `LogPartition`): an all -inf slice still gives -inf (the max is clamped to the lowest float, not replaced by 0
    after an extra comparison), and the last three ops are in place."""
    top = x.amax(dim, keepdim=True).clamp_(min=torch.finfo(x.dtype).min)
    return (x - top).exp_().sum(dim).log_().add_(top.squeeze(dim))


def last_word_values(values: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """Each row's value at its last word: `values` S x (B, T) per word, `mask` (B, S) a prefix mask -> (B, T).
    A row without words reads word 0."""
    last = (mask.sum(1) - 1).clamp(min=0)
    stacked = torch.stack(values, dim=1)  # (B, S, T)
    return stacked.gather(1, last.view(-1, 1, 1).expand(-1, 1, stacked.shape[2])).squeeze(1)
