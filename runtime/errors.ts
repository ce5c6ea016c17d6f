// Errors the services raise on purpose. Each carries the HTTP status and machine-readable code the
// API answers with, so the HTTP layer maps them without knowing every service.
export interface ErrorIssue {
  path: string;
  message: string;
}

export class AppError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 422 | 502 | 503,
    readonly code: string,
    message: string,
    readonly issues?: ErrorIssue[],
  ) {
    super(message);
    this.name = "AppError";
  }
}

export const notFound = (what: string, id: string) => new AppError(404, "not_found", `${what} ${id} not found`);
export const conflict = (code: string, message: string) => new AppError(409, code, message);
