/**
 * Raised when stored editor content cannot be turned into an email.
 *
 * `path` points into the document ("content[2].content[0].attrs.level", or ""
 * for the root) so an API error or the editor can highlight the exact node
 * instead of rejecting the whole template with a vague message.
 */
export class RenderError extends Error {
  override readonly name = 'RenderError';
  readonly path: string;

  constructor(message: string, path = '') {
    super(message);
    this.path = path;
  }
}
