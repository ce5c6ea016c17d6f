// Message text as every database keeps it whole. The embedded file's driver reads a text up to its
// first NUL (U+0000): a message holding one read back cut short there, while a libSQL server kept it
// whole. Text from HTTP with a NUL is refused (400); text from a provider or a plugin (an answer, a
// tool result, a transform, a summary) has each NUL replaced by U+FFFD before it is stored or returned,
// so the reply, the hooks and the history all carry the same text on either database. So has a lone
// surrogate, which storage turns into U+FFFD anyway (a tool result's "\ud800" was the answer's as it
// was and the history's as U+FFFD).
export const storedText = (text: string): string => {
  const clean = text.includes("\u0000") ? text.replaceAll("\u0000", "\uFFFD") : text;
  return clean.isWellFormed() ? clean : clean.toWellFormed();
};
